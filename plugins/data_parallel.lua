-- data_parallel: R copies of a smaller plan behind a router (vLLM/SGLang --data-parallel-size, or
-- R engines behind a load balancer). Each copy is one GPU, a TP group, a pipeline of two, or (MoE)
-- an EP group, placed like the single-copy strategies place it; copies take disjoint GPUs.
-- Capacity grows about linearly with R while per-request latency stays that of one copy, so at a
-- high rate R small copies can meet the SLOs on fewer GPUs than one wide plan.
return {
  name = "data_parallel",
  description = "R replicas of a single-GPU, TP, PP2 or EP plan behind a router (least outstanding requests).",
  params = {
    replicas = {type = "int", default = 0, help = "one replica count only; 0 proposes 2..8 and powers of two"},
    router = {type = "string", default = "least_outstanding",
              help = "\"round_robin\", \"least_outstanding\" or \"session_affinity\""},
  },
  candidates = function(model, machine, options)
    local n = machine.gpu_count
    local max_mem = lib.plans.max_gpu_memory(machine)
    local bases = {}
    -- One copy's shapes: TP degrees (1 = a single GPU) whose weights fit...
    for _, tp in ipairs(lib.layers.divisors(model.heads)) do
      if 2 * tp <= n and (tp == 1 or lib.layers.tp_ok(model, tp)) and model.weight_bytes / tp < max_mem then
        local g = lib.placement.best_group(machine, tp)
        if not lib.placement.one_host(machine, g) then g = nil end  -- TP over the network: not proposed
        if g then
          local plan = lib.plans.pipeline(machine, {g}, {{0, model.layers}})
          plan.name = lib.plans.name(plan)
          bases[#bases + 1] = plan
        end
      end
    end
    -- ... a two-stage pipeline of single GPUs (a model too big for one GPU, on PCIe boxes) ...
    if 4 <= n and model.layers >= 2 then
      local ranges = lib.layers.balanced_split(model, 2)
      local heaviest = 0
      for i, r in ipairs(ranges) do
        heaviest = math.max(heaviest, lib.layers.stage_bytes(model, r[1], r[2], i == 1, i == 2))
      end
      if heaviest < max_mem then
        local pair = lib.placement.best_group(machine, 2)
        local plan = lib.plans.pipeline(machine, {{pair[1]}, {pair[2]}}, ranges)
        plan.name = lib.plans.name(plan)
        plan.micro_batches = 2
        bases[#bases + 1] = plan
      end
    end
    -- ... and for MoE, an EP group with TP-sharded attention.
    if model.is_moe then
      for _, ep in ipairs(lib.layers.divisors(model.experts)) do
        if ep >= 2 and 2 * ep <= n and lib.layers.tp_ok(model, ep) and model.weight_bytes / ep < max_mem then
          local g = lib.placement.best_group(machine, ep)
          if not lib.placement.one_host(machine, g) then goto next_ep end  -- TP-sharded attention: one host
          local plan = lib.plans.pipeline(machine, {g}, {{0, model.layers}})
          plan.ep, plan.ep_attention = ep, "tp"
          plan.expert_gpu = {}
          for e = 0, model.experts - 1 do plan.expert_gpu[e + 1] = g[e * ep // model.experts + 1] end
          plan.name = ("ep%d-tp[%s]"):format(ep, lib.plans.ids(g))
          bases[#bases + 1] = plan
        end
        ::next_ep::
      end
    end
    local plans = {}
    for _, base in ipairs(bases) do
      local counts = {}
      for _, r in ipairs(lib.replicas.counts(#lib.replicas.order(base), n)) do
        if options.replicas == 0 or options.replicas == r then counts[#counts + 1] = r end
      end
      if #counts > 0 then
        local lists = lib.replicas.groups(machine, base, counts[#counts])  -- once, for the largest count
        for _, r in ipairs(counts) do
          local p = lib.replicas.replicate(machine, base, r, options.router, lists)
          if p then plans[#plans + 1] = p end
        end
      end
    end
    return plans
  end,
}
