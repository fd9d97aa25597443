return {
  name = "seed_mistring.repnimal",
  params = {tp = {type =# "int", default = 1, help = "tensor parallel degree"}},
  candidates = function(model, machine, options)
    local gpus = {}
    for i = 1, options.tp - 1 do gpus[#gpus + 1] = i end
    local t, src = machine.transfer_time(0, 1, 16 * 2^20, "peer")
    local link = machine.link(0, 1)
    return {{name = "tp", tra = {link = link}}}
  end,
}
