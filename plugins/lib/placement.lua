-- lib.placement: choosing physical GPUs. Every function takes the `machine` a strategy receives.
-- "Fast" means the time machine.transfer_time gives for a representative message in the best
-- usable mode (peer when P2P works in that direction, host-staged otherwise).
local M = {}

M.probe_bytes = 16 * 1024 * 1024  -- a TP all-reduce / PP activation of a large decode batch

local rank_of_path = {X = 0, PIX = 2, PXB = 3, PHB = 4, NODE = 5, SYS = 6}
local function path_rank(t)
  if t:sub(1, 2) == "NV" then return 1 end
  return rank_of_path[t] or 7
end

-- Best usable mode from a to b: "peer" when P2P works that way, else "host_staged".
function M.mode(machine, a, b)
  return machine.p2p(a, b) and "peer" or "host_staged"
end

-- Seconds to move `bytes` from a to b in the best usable mode. Remembered per machine and size:
-- chain() asks for the same pairs tens of thousands of times on a 64-GPU cluster (PP depths 2..64,
-- greedy walks from several starts), and each answer is a priced route in C++.
local pair_cache = setmetatable({}, {__mode = "k"})
function M.pair_time(machine, a, b, bytes)
  bytes = bytes or M.probe_bytes
  local per = pair_cache[machine]
  if not per then per = {}; pair_cache[machine] = per end
  local by_size = per[bytes]
  if not by_size then by_size = {}; per[bytes] = by_size end
  local key = a * machine.gpu_count + b
  local t = by_size[key]
  if t then return t end
  t = machine.transfer_time(a, b, bytes, M.mode(machine, a, b))
  if not t then t = machine.transfer_time(a, b, bytes, "host_staged") end
  t = t or math.huge
  by_size[key] = t
  return t
end

-- True when every ordered pair of the group can use P2P (NCCL may use it for the collectives).
function M.group_p2p(machine, gpus)
  for _, a in ipairs(gpus) do
    for _, b in ipairs(gpus) do
      if a ~= b and not machine.p2p(a, b) then return false end
    end
  end
  return true
end

-- Cost of a TP/EP group: a ring collective runs at the pace of its slowest pair, so the slowest
-- ordered pair's time, then the worst path type, then the total (smaller is better).
function M.group_cost(machine, gpus, bytes)
  local worst, worst_rank, total = 0, 0, 0
  for _, a in ipairs(gpus) do
    for _, b in ipairs(gpus) do
      if a ~= b then
        local t = M.pair_time(machine, a, b, bytes)
        worst = math.max(worst, t)
        total = total + t
        worst_rank = math.max(worst_rank, path_rank(machine.link(a, b).path_type))
      end
    end
  end
  return {worst, worst_rank, total}
end

local function less(x, y)  -- lexicographic on cost triples, with a relative tolerance on times
  for i = 1, #x do
    local tol = (i ~= 2) and 1e-9 * math.max(math.abs(x[i]), math.abs(y[i])) or 0
    if x[i] < y[i] - tol then return true end
    if x[i] > y[i] + tol then return false end
  end
  return false
end
M.cost_less = less

local function all_gpus(machine)
  local pool = {}
  for i = 0, machine.gpu_count - 1 do pool[#pool + 1] = i end
  return pool
end

-- Every k-subset of pool (ids ascending within each), in lexicographic order.
function M.subsets(pool, k)
  local out, cur = {}, {}
  local function rec(start)
    if #cur == k then out[#out + 1] = {table.unpack(cur)}; return end
    for i = start, #pool - (k - #cur) + 1 do
      cur[#cur + 1] = pool[i]
      rec(i + 1)
      cur[#cur] = nil
    end
  end
  rec(1)
  return out
end

-- A signature two equivalent groups share: each member's symmetry class with the sorted path
-- types (and link rates) to the other members, sorted. Groups with equal signatures are
-- interchangeable for planning (the machine's symmetry maps one onto the other in all the
-- shipped topologies; it is a necessary condition in general).
function M.signature(machine, gpus)
  local parts = {}
  for _, a in ipairs(gpus) do
    local links = {}
    for _, b in ipairs(gpus) do
      if a ~= b then
        local l = machine.link(a, b)
        links[#links + 1] = ("%s/%.0f/%s"):format(l.path_type, l.best_gbps, tostring(l.p2p))
      end
    end
    table.sort(links)
    parts[#parts + 1] = machine.gpus[a + 1].symmetry_class .. "(" .. table.concat(links, ",") .. ")"
  end
  table.sort(parts)
  return table.concat(parts, ";")
end

-- k-subsets of pool (default: all GPUs), one per equivalence class under the machine's symmetry:
-- on 8 GPUs behind 4 switches on 2 sockets, the pairs are {same switch, same socket, cross socket}.
function M.subsets_modulo_symmetry(machine, k, pool)
  pool = pool or all_gpus(machine)
  local seen, out = {}, {}
  for _, s in ipairs(M.subsets(pool, k)) do
    local sig = M.signature(machine, s)
    if not seen[sig] then
      seen[sig] = true
      out[#out + 1] = s
    end
  end
  return out
end

-- Ordered arrangements of k GPUs of pool, one per class: two orders are equivalent when their
-- members' classes and consecutive links read the same.
function M.permutations_modulo_symmetry(machine, k, pool)
  pool = pool or all_gpus(machine)
  local seen, out, cur, used = {}, {}, {}, {}
  local function sig()
    local s = {}
    for i, g in ipairs(cur) do
      s[#s + 1] = tostring(machine.gpus[g + 1].symmetry_class)
      if i > 1 then s[#s + 1] = machine.link(cur[i - 1], g).path_type end
    end
    return table.concat(s, "-")
  end
  local function rec()
    if #cur == k then
      local key = sig()
      if not seen[key] then seen[key] = true; out[#out + 1] = {table.unpack(cur)} end
      return
    end
    for _, g in ipairs(pool) do
      if not used[g] then
        used[g] = true; cur[#cur + 1] = g
        rec()
        cur[#cur] = nil; used[g] = nil
      end
    end
  end
  rec()
  return out
end

-- Beyond this many k-subsets, best_group grows groups greedily instead of trying every subset
-- (C(1024, 8) subsets do not fit any limit; C(8, 4) = 70 do).
M.exhaustive_subsets = 2000

local function too_many_subsets(n, k)
  local c = 1
  for i = 1, k do
    c = c * (n - k + i) / i
    if c > M.exhaustive_subsets then return true end
  end
  return false
end

-- Greedy group for large pools: from a seed, the candidates are the 4k GPUs of pool nearest to
-- it; the group takes, one at a time, the candidate whose slowest pair with the members so far is
-- fastest (ties to lower ids). Seeds: the first GPU of each symmetry class in pool (at most 8).
local function greedy_group(machine, k, pool)
  local seeds, seen_class = {}, {}
  for _, g in ipairs(pool) do
    local c = machine.gpus[g + 1].symmetry_class
    if not seen_class[c] and #seeds < 8 then seen_class[c] = true; seeds[#seeds + 1] = g end
  end
  local best, best_cost
  for _, seed in ipairs(seeds) do
    local cand = {}
    for _, g in ipairs(pool) do
      if g ~= seed then
        cand[#cand + 1] = {g = g, w = math.max(M.pair_time(machine, seed, g), M.pair_time(machine, g, seed))}
      end
    end
    table.sort(cand, function(x, y) if x.w ~= y.w then return x.w < y.w end return x.g < y.g end)
    for i = #cand, 4 * k + 1, -1 do cand[i] = nil end
    local group, used = {seed}, {}
    while #group < k and #group <= #cand do
      local bi
      for i, c in ipairs(cand) do
        if not used[i] and (not bi or c.w < cand[bi].w or (c.w == cand[bi].w and c.g < cand[bi].g)) then bi = i end
      end
      used[bi] = true
      local x = cand[bi].g
      group[#group + 1] = x
      for i, c in ipairs(cand) do
        if not used[i] then c.w = math.max(c.w, M.pair_time(machine, x, c.g), M.pair_time(machine, c.g, x)) end
      end
    end
    if #group == k then
      table.sort(group)
      local cost = M.group_cost(machine, group)
      if not best or less(cost, best_cost) then best, best_cost = group, cost end
    end
  end
  return best, best_cost
end

-- The k GPUs of pool with the fastest links among them (see group_cost); ties go to lower ids.
-- Exact (every subset modulo symmetry) up to M.exhaustive_subsets subsets, greedy beyond.
function M.best_group(machine, k, pool)
  pool = pool or all_gpus(machine)
  if too_many_subsets(#pool, k) then return greedy_group(machine, k, pool) end
  local best, best_cost
  for _, s in ipairs(M.subsets_modulo_symmetry(machine, k, pool)) do
    local c = M.group_cost(machine, s)
    if not best or less(c, best_cost) then best, best_cost = s, c end
  end
  return best, best_cost
end

-- Splits pool into groups of k, taking the best remaining group each time. Leftovers are unused.
function M.partition(machine, pool, k)
  local left, groups = {table.unpack(pool)}, {}
  while #left >= k do
    local g = M.best_group(machine, k, left)
    groups[#groups + 1] = g
    local taken = {}
    for _, x in ipairs(g) do taken[x] = true end
    local rest = {}
    for _, x in ipairs(left) do if not taken[x] then rest[#rest + 1] = x end end
    left = rest
  end
  return groups
end

-- Time of a stage boundary: rank r of `to` receives from rank r mod #from of `from`; the slowest
-- of those transfers.
function M.boundary_time(machine, from, to, bytes)
  local worst = 0
  for r = 1, #to do
    worst = math.max(worst, M.pair_time(machine, from[(r - 1) % #from + 1], to[r], bytes))
  end
  return worst
end

-- Greedy chains, kept per groups table between calls: a greedy nearest-neighbour order is the
-- same whatever its length, so the orders for n = 2, 3, ... extend one another (strategies ask
-- for every depth). Beyond M.all_starts groups, the walks start from one group per symmetry class
-- of its first GPU (at most 8) instead of from every group; beyond M.window groups, each step looks
-- at the next M.window unused groups in list order (groups are listed by GPU id, so neighbours
-- come first).
M.window = 64
M.all_starts = 16  -- up to this many groups, the walk starts from every group
local greedy_cache = setmetatable({}, {__mode = "k"})

local function greedy_state(machine, groups, bytes)
  local per = greedy_cache[groups]
  if not per then per = {}; greedy_cache[groups] = per end
  local key = tostring(bytes or M.probe_bytes)
  if per[key] then return per[key] end
  local starts = {}
  if #groups <= M.all_starts then
    for s = 1, #groups do starts[#starts + 1] = s end
  else
    local seen = {}
    for s, g in ipairs(groups) do
      local c = machine.gpus[g[1] + 1].symmetry_class
      if not seen[c] and #starts < 8 then seen[c] = true; starts[#starts + 1] = s end
    end
  end
  local st = {starts = {}}
  for _, s in ipairs(starts) do
    st.starts[#st.starts + 1] = {order = {groups[s]}, used = {[s] = true}, last = s, t = 0}
  end
  per[key] = st
  return st
end

local function extend(machine, groups, run, n, bytes)
  while #run.order < n do
    local bi, bt, looked = nil, nil, 0
    for i, g in ipairs(groups) do
      if not run.used[i] then
        local t = M.boundary_time(machine, groups[run.last], g, bytes)
        if not bt or t < bt then bi, bt = i, t end
        looked = looked + 1
        if #groups > M.window and looked >= M.window then break end
      end
    end
    run.used[bi] = true
    run.last = bi
    run.order[#run.order + 1] = groups[bi]
    run.t = run.t + bt
  end
end

-- Chooses and orders n of the given groups (stages) so consecutive ones sit on the fastest links:
-- minimises the sum of boundary times. Exact for up to 7 groups, greedy nearest-neighbour (from
-- every start) beyond. Returns the ordered groups and the total boundary time.
function M.chain(machine, groups, n, bytes)
  n = n or #groups
  local best, best_t
  local function consider(order)
    local t = 0
    for i = 2, #order do t = t + M.boundary_time(machine, order[i - 1], order[i], bytes) end
    if not best or t < best_t - 1e-12 then best, best_t = {table.unpack(order)}, t end
  end
  if #groups <= 7 then
    local cur, used = {}, {}
    local function rec()
      if #cur == n then consider(cur); return end
      for i, g in ipairs(groups) do
        if not used[i] then
          used[i] = true; cur[#cur + 1] = g
          rec()
          cur[#cur] = nil; used[i] = nil
        end
      end
    end
    rec()
  else
    for _, run in ipairs(greedy_state(machine, groups, bytes).starts) do
      extend(machine, groups, run, n, bytes)
      consider({table.unpack(run.order, 1, n)})
    end
  end
  return best, best_t
end

-- Islands to keep TP inside: NVLink islands when any has 2+ GPUs, else PCIe switch groups, else
-- sockets.
function M.islands(machine)
  for _, key in ipairs({"nvlink_islands", "switch_groups", "socket_groups"}) do
    for _, g in ipairs(machine[key]) do
      if #g > 1 then return machine[key], key end
    end
  end
  return {all_gpus(machine)}, "all"
end

function M.all_gpus(machine) return all_gpus(machine) end

-- True when the GPUs sit on one host: every pair has an NVLink or PCIe path ("-" is the path type
-- of two GPUs that only the network joins, a cluster's hosts). TP groups stay on one host: their
-- all-reduces run twice per layer, and a NIC is an order of magnitude slower than NVLink.
-- GPUs on GPU 0's host (a cluster's hosts are alike), and whether the machine has other hosts.
function M.host_size(machine)
  local n = 1
  for g = 1, machine.gpu_count - 1 do
    if M.one_host(machine, {0, g}) then n = n + 1 end
  end
  return n, n < machine.gpu_count
end

function M.one_host(machine, gpus)
  for i = 2, #gpus do
    if machine.link(gpus[1], gpus[i]).path_type == "-" then return false end
  end
  return true
end

return M
