-- tensor_parallel: every layer split over a TP group (Megatron/vLLM style). One plan per TP degree
-- that divides the heads (KV heads divide it or are replicated) and whose weights can fit, placed
-- on the GPUs with the fastest links among them.
return {
  name = "tensor_parallel",
  description = "Every layer split over tp GPUs (column/row-parallel, all-reduce twice per layer), "
    .. "placed on the fastest-linked GPUs.",
  params = {
    tp = {type = "int", default = 0, help = "one TP degree only; 0 proposes every valid degree >= 2"},
    all_placements = {type = "bool", default = false,
                      help = "also propose every non-equivalent GPU group, not just the fastest"},
  },
  candidates = function(model, machine, options)
    local plans = {}
    local max_mem = lib.plans.max_gpu_memory(machine)
    for _, tp in ipairs(lib.layers.divisors(model.heads)) do
      local wanted = options.tp == 0 or options.tp == tp
      if wanted and tp >= 2 and tp <= machine.gpu_count and lib.layers.tp_ok(model, tp)
         and model.weight_bytes / tp < max_mem then
        local groups
        if options.all_placements then
          groups = lib.placement.subsets_modulo_symmetry(machine, tp)
        else
          groups = {(lib.placement.best_group(machine, tp))}
        end
        local on_one_host = {}  -- a cluster's hosts: TP never crosses the network
        for _, g in ipairs(groups) do
          if lib.placement.one_host(machine, g) then on_one_host[#on_one_host + 1] = g end
        end
        for _, g in ipairs(on_one_host) do
          local plan = lib.plans.pipeline(machine, {g}, {{0, model.layers}})
          plan.name = lib.plans.name(plan)
          local l = machine.link(g[1], g[2])
          plan.notes = {("TP group %s: slowest pair %s, %s"):format(lib.plans.ids(g), l.path_type,
                        plan.p2p and "P2P everywhere" or "no P2P on some pair: NCCL goes through the host")}
          if model.kv_heads < tp and not model.mla then
            plan.notes[#plan.notes + 1] = ("KV heads replicated: %d KV heads over %d ranks"):format(model.kv_heads, tp)
          end
          plans[#plans + 1] = plan
        end
      end
    end
    return plans
  end,
}
