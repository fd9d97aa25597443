-- hybrid: tensor parallelism inside fast islands (NVLink islands, else PCIe switches), pipeline
-- parallelism across them, so the chatty all-reduces stay on the fast links and only one
-- activation per boundary crosses the slow ones.
return {
  name = "hybrid",
  description = "TP inside NVLink/switch islands, PP across them; islands ordered along the fastest links.",
  params = {
    tp = {type = "int", default = 0, help = "one TP degree only; 0 proposes every degree that fits an island"},
    pp = {type = "int", default = 0, help = "one pipeline depth only; 0 proposes every depth >= 2"},
  },
  candidates = function(model, machine, options)
    local islands, kind = lib.placement.islands(machine)
    local plans = {}
    local max_mem = lib.plans.max_gpu_memory(machine)
    for _, tp in ipairs(lib.layers.divisors(model.heads)) do
      if tp >= 2 and (options.tp == 0 or options.tp == tp) and lib.layers.tp_ok(model, tp) then
        local groups = {}
        for _, island in ipairs(islands) do
          for _, g in ipairs(lib.placement.partition(machine, island, tp)) do groups[#groups + 1] = g end
        end
        for pp = 2, math.min(#groups, model.layers) do
          if options.pp == 0 or options.pp == pp then
            local ranges = lib.layers.balanced_split(model, pp)
            local heaviest = 0
            for i, r in ipairs(ranges) do
              heaviest = math.max(heaviest, lib.layers.stage_bytes(model, r[1], r[2], i == 1, i == pp) / tp)
            end
            if heaviest < max_mem then
              local order = lib.placement.chain(machine, groups, pp)
              local plan = lib.plans.pipeline(machine, order, ranges)
              plan.name = lib.plans.name(plan)
              plan.micro_batches = pp
              plan.notes = {("TP%d inside %s, PP%d across them; boundaries %s"):format(
                tp, kind, pp, table.concat(plan.boundary_modes, ","))}
              plans[#plans + 1] = plan
            end
          end
        end
      end
    end
    return plans
  end,
}
