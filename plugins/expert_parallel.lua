-- expert_parallel: routed experts spread over ep GPUs (ep divides the expert count); attention
-- either TP-sharded over the same GPUs (experts combined by one all-reduce, vLLM's default EP) or
-- replicated with the batch split across GPUs (tokens travel by all-to-all dispatch and combine).
return {
  name = "expert_parallel",
  description = "MoE only: experts spread over ep GPUs (contiguous blocks), attention TP-sharded or "
    .. "replicated (data parallel, all-to-all dispatch/combine).",
  params = {
    ep = {type = "int", default = 0, help = "one EP degree only; 0 proposes every degree >= 2 dividing the experts"},
    attention = {type = "string", default = "both", help = "\"tp\", \"replicated\" or \"both\""},
  },
  candidates = function(model, machine, options)
    if not model.is_moe then return {} end
    local a = options.attention
    if a ~= "tp" and a ~= "replicated" and a ~= "both" then
      error("option attention: expected \"tp\", \"replicated\" or \"both\", got \"" .. a .. "\"")
    end
    local plans = {}
    for _, ep in ipairs(lib.layers.divisors(model.experts)) do
      if ep >= 2 and ep <= machine.gpu_count and (options.ep == 0 or options.ep == ep) then
        local g = lib.placement.best_group(machine, ep)
        local map = {}
        for e = 0, model.experts - 1 do map[e + 1] = g[e * ep // model.experts + 1] end
        for _, mode in ipairs({"tp", "replicated"}) do
          -- TP-sharded attention only on one host; across hosts attention is replicated (DP)
          -- and only the experts' all-to-all crosses the network.
          local ok = (a == "both" or a == mode) and
                     (mode == "replicated" or (lib.layers.tp_ok(model, ep) and lib.placement.one_host(machine, g)))
          if ok then
            local plan = lib.plans.pipeline(machine, {g}, {{0, model.layers}})
            plan.ep = ep
            plan.expert_gpu = map
            plan.ep_attention = mode
            plan.name = ("ep%d-%s[%s]"):format(ep, mode == "tp" and "tp" or "dp", lib.plans.ids(g))
            plan.notes = {("%d experts per GPU; attention %s"):format(model.experts // ep,
                          mode == "tp" and "TP-sharded, experts combined by all-reduce"
                                        or "replicated, batch split, all-to-all dispatch/combine")}
            plans[#plans + 1] = plan
          end
        end
      end
    end
    return plans
  end,
}
