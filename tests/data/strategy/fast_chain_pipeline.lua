-- A user strategy shipped as a test (no rebuild needed): a 4-stage pipeline whose consecutive
-- stages sit on the fastest links. It walks greedily from GPU 0 to the unused GPU with the fastest
-- link (machine.link(a, b).best_gbps, ties to the lower transfer time), and splits layers with the
-- shared helper library.
return {
  name = "fast_chain_pipeline",
  description = "Pipeline over a greedy fastest-link chain of GPUs starting at GPU 0.",
  params = { stages = {type = "int", default = 4, help = "pipeline depth"} },
  candidates = function(model, machine, options)
    local n = options.stages
    if n > machine.gpu_count then error("stages=" .. n .. " but the machine has " .. machine.gpu_count .. " GPUs") end
    local chain, used = {0}, {[0] = true}
    while #chain < n do
      local last, best, best_key = chain[#chain], nil, nil
      for g = 0, machine.gpu_count - 1 do
        if not used[g] then
          local l = machine.link(last, g)
          local t = machine.transfer_time(last, g, 1 << 24, l.p2p and "peer" or "host_staged")
          local key = l.best_gbps * 1e6 - t
          if not best or key > best_key then best, best_key = g, key end
        end
      end
      chain[#chain + 1] = best
      used[best] = true
    end
    local groups = {}
    for i, g in ipairs(chain) do groups[i] = {g} end
    local plan = lib.plans.pipeline(machine, groups, lib.layers.balanced_split(model, n))
    plan.name = "chain" .. lib.plans.name(plan)
    plan.notes = {"consecutive stages on the fastest links"}
    return {plan}
  end,
}
