-- single_gpu: the whole model on one GPU. The baseline every multi-GPU plan is compared with.
return {
  name = "single_gpu",
  description = "Whole model on one GPU: the no-communication baseline every split is compared with.",
  params = {
    gpu = {type = "int", default = -1,
           help = "GPU id to use; -1 proposes one GPU per symmetry class (usually just GPU 0)"},
  },
  candidates = function(model, machine, options)
    local choices = {}
    if options.gpu >= 0 then
      if options.gpu >= machine.gpu_count then
        error(("option gpu=%d: the machine has GPUs 0..%d"):format(options.gpu, machine.gpu_count - 1))
      end
      choices = {options.gpu}
    else
      for _, class in ipairs(machine.symmetry_classes) do choices[#choices + 1] = class[1] end
    end
    local plans = {}
    for _, g in ipairs(choices) do
      plans[#plans + 1] = {
        name = ("single[%d]"):format(g),
        stages = {{gpus = {g}, layer_begin = 0, layer_end = model.layers, tp = 1}},
        notes = {"baseline: no inter-GPU communication"},
      }
    end
    return plans
  end,
}
