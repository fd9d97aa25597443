-- lib.replicas: data-parallel copies of a plan (plan JSON `replicas` and `router`, docs in
-- plugins/README.md). Each copy gets its own GPUs, stage by stage the best free group of the
-- stage's size (lib.placement.best_group), so on an 8-GPU NVSwitch box TP4 x 2 is {0-3} and {4-7},
-- and on a 2-socket PCIe box each copy stays on one socket when it can.
local M = {}

-- The plan's GPUs in stage order (the order `replicas` lists them in).
function M.order(plan)
  local out = {}
  for _, s in ipairs(plan.stages) do
    for _, g in ipairs(s.gpus) do out[#out + 1] = g end
  end
  return out
end

-- Up to `copies` GPU lists for plan (the first is the plan's own): fewer when the machine runs out
-- of GPUs, or of groups on one host for a stage that must not span hosts (TP needs NVLink or PCIe
-- between its GPUs, not the network). Copy k is the same whatever `copies` is, so callers build
-- the lists once for their largest count and take prefixes.
function M.groups(machine, plan, copies)
  local used, lists = {}, {M.order(plan)}
  for _, g in ipairs(lists[1]) do used[g] = true end
  local free = machine.gpu_count - #lists[1]
  while #lists < copies and free >= #lists[1] do
    local list = {}
    for _, s in ipairs(plan.stages) do
      local g
      if #s.gpus == 1 then  -- any free GPU will do: the lowest id, no search
        for x = 0, machine.gpu_count - 1 do if not used[x] then g = {x}; break end end
      else
        local pool = {}
        for x = 0, machine.gpu_count - 1 do if not used[x] then pool[#pool + 1] = x end end
        g = lib.placement.best_group(machine, #s.gpus, pool)
        if g and not lib.placement.one_host(machine, g) then g = nil end
      end
      if not g then return lists end
      for _, x in ipairs(g) do used[x] = true; list[#list + 1] = x end
      free = free - #g
    end
    lists[#lists + 1] = list
  end
  return lists
end

-- plan copied onto the first `copies` of `lists` (M.groups; built here when nil) behind `router`
-- ("least_outstanding" by default), renamed "dp<copies>x<name>"; nil when there are fewer lists.
function M.replicate(machine, plan, copies, router, lists)
  lists = lists or M.groups(machine, plan, copies)
  if #lists < copies then return nil end
  local taken = {}
  for i = 1, copies do taken[i] = lists[i] end
  lists = taken
  local out = {}
  for k, v in pairs(plan) do out[k] = v end
  out.replicas = lists
  out.router = router or "least_outstanding"
  out.name = ("dp%dx%s"):format(copies, plan.name)
  local notes = {}
  for i, n in ipairs(plan.notes or {}) do notes[i] = n end
  local shown = {}  -- at most four copies named: a note stays short on 1024 GPUs
  for i, l in ipairs(lists) do
    if i > 4 then shown[#shown + 1] = ("... (%d more)"):format(#lists - 4); break end
    shown[i] = "[" .. lib.plans.ids(l) .. "]"
  end
  notes[#notes + 1] = ("%d replicas behind a %s router: %s"):format(copies, (out.router:gsub("_", "-")),
                                                                   table.concat(shown, " "))
  out.notes = notes
  return out
end

-- Replica counts worth proposing for a plan of `size` GPUs on `gpus` GPUs: every count up to 8,
-- then powers of two (capacity grows about linearly with the count; the search prices each).
function M.counts(size, gpus)
  local out = {}
  for r = 2, gpus // size do
    if r <= 8 or (r & (r - 1)) == 0 then out[#out + 1] = r end
  end
  return out
end

return M
