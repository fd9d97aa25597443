-- pipeline_parallel: contiguous layer ranges on consecutive GPUs, memory-balanced (the first stage
-- also holds the embedding, the last the LM head), stages ordered along the fastest links. Each
-- boundary uses peer copies where P2P works and host-staged copies where it does not.
return {
  name = "pipeline_parallel",
  description = "Contiguous, memory-balanced layer ranges on pp GPUs ordered along the fastest links; "
    .. "peer copies at boundaries where P2P works, host-staged otherwise.",
  params = {
    pp = {type = "int", default = 0, help = "one pipeline depth only; 0 proposes every depth from 2 to the GPU count"},
    balance = {type = "string", default = "memory",
               help = "\"memory\": balance bytes incl. embedding/LM head; \"layers\": equal layer counts"},
    micro_batches = {type = "int", default = 0, help = "micro-batches in flight; 0 means one per stage"},
  },
  candidates = function(model, machine, options)
    if options.balance ~= "memory" and options.balance ~= "layers" then
      error("option balance: expected \"memory\" or \"layers\", got \"" .. options.balance .. "\"")
    end
    local plans = {}
    local max_mem = lib.plans.max_gpu_memory(machine)
    local singles = {}
    for g = 0, machine.gpu_count - 1 do singles[#singles + 1] = {g} end
    -- On a cluster, single-GPU stages stay within one host's count: deeper pipelines of single
    -- GPUs leave every NVLink idle and put more boundaries on the network (hybrid proposes PP
    -- across hosts with TP inside them), and each depth costs a layer split and a chain.
    local host, several = lib.placement.host_size(machine)
    local deepest = math.min(machine.gpu_count, model.layers)
    if several then deepest = math.min(deepest, host) end
    for pp = 2, deepest do
      if options.pp == 0 or options.pp == pp then
        local ranges = lib.layers.balanced_split(model, pp, {by = options.balance})
        local heaviest = 0
        for i, r in ipairs(ranges) do
          heaviest = math.max(heaviest, lib.layers.stage_bytes(model, r[1], r[2], i == 1, i == pp))
        end
        if heaviest < max_mem then
          local order, t = lib.placement.chain(machine, singles, pp)
          local plan = lib.plans.pipeline(machine, order, ranges)
          plan.name = lib.plans.name(plan)
          plan.micro_batches = options.micro_batches > 0 and options.micro_batches or pp
          local counts = {}
          for i, r in ipairs(ranges) do counts[i] = tostring(r[2] - r[1]) end
          plan.notes = {("layers per stage %s (%s-balanced); boundaries %s; %.1f us of boundary copies per 16 MiB")
                        :format(table.concat(counts, "/"), options.balance, table.concat(plan.boundary_modes, ","), t * 1e6)}
          plans[#plans + 1] = plan
        end
      end
    end
    return plans
  end,
}
