-- lib.plans: building plan tables (the plan JSON schema, docs in plugins/README.md).
local M = {}

-- "0,1" for {0, 1}.
function M.ids(gpus)
  local s = {}
  for i, g in ipairs(gpus) do s[i] = tostring(g) end
  return table.concat(s, ",")
end

-- A pipeline plan from ordered stage GPU groups and layer ranges ({{b, e}, ...}). Boundary modes
-- are "peer" where every rank pair of the boundary can use P2P, else "host_staged"; collectives
-- use P2P only if every pair of every group can.
function M.pipeline(machine, groups, ranges)
  assert(#groups == #ranges, "plans.pipeline: one layer range per stage")
  local stages, modes, p2p = {}, {}, true
  for i, g in ipairs(groups) do
    stages[i] = {gpus = g, layer_begin = ranges[i][1], layer_end = ranges[i][2], tp = #g,
                 embeddings = (i == 1), lm_head = (i == #groups)}
    if not lib.placement.group_p2p(machine, g) then p2p = false end
    if i > 1 then
      local prev, ok = groups[i - 1], true
      for r = 1, #g do
        if not machine.p2p(prev[(r - 1) % #prev + 1], g[r]) then ok = false end
      end
      modes[i - 1] = ok and "peer" or "host_staged"
    end
  end
  return {stages = stages, boundary_modes = modes, p2p = p2p}
end

-- Name in the tables' vocabulary: tp2[0,1], pp2[0|1], tp2pp2[0,1|2,3].
function M.name(plan)
  local tp, parts = plan.stages[1].tp, {}
  for i, s in ipairs(plan.stages) do parts[i] = M.ids(s.gpus) end
  local pp = #plan.stages
  local head = (tp > 1 and ("tp" .. tp) or "") .. (pp > 1 and ("pp" .. pp) or "")
  if head == "" then head = "single" end
  return head .. "[" .. table.concat(parts, "|") .. "]"
end

-- Largest GPU memory on the machine (a quick pre-filter; the C++ memory check is authoritative).
function M.max_gpu_memory(machine)
  local m = 0
  for _, g in ipairs(machine.gpus) do m = math.max(m, g.memory_bytes) end
  return m
end

return M
