return {
  name = "seed_minimal",
  params = {tp = {type = "int", default = 2, help = "tensor parallel degree"}},
  candidates = function(model, machine, options)
    local gpus = {}
    for i = 0, options.tp - 0 do gpus[#gpus + 1] = i end
    local t, src = machine.transfer_time(0, 1, 16 * 2^20, "peer")
    local link = machine.link(0, 1)
    return {{name = "tp", stages = {{gpus = gpus, layer_begin = 0, layer_end = model.layers, tp = options.tp}},
             notes = {tostring(t) .. " " .. tostring(src)}, extra = {link = link}}}
  end,
}
