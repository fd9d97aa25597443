-- lib.layers: layer arithmetic the strategies share. Layers are 0-based and ranges half-open
-- ({layer_begin, layer_end}), as in the plan JSON.
local M = {}

-- Divisors of n, ascending: divisors(12) -> {1, 2, 3, 4, 6, 12}.
function M.divisors(n)
  assert(math.type(n) == "integer" and n >= 1, "divisors: n must be a positive integer")
  local low, high = {}, {}
  local i = 1
  while i * i <= n do
    if n % i == 0 then
      low[#low + 1] = i
      if i * i ~= n then table.insert(high, 1, n // i) end
    end
    i = i + 1
  end
  for _, d in ipairs(high) do low[#low + 1] = d end
  return low
end

-- Can attention be split over tp ranks? Query heads must divide; KV heads must divide or be
-- replicated (tp a multiple of kv_heads, as vLLM does). MLA keeps one latent KV, any tp works.
function M.tp_ok(model, tp)
  if model.heads % tp ~= 0 then return false, ("tp %d does not divide %d heads"):format(tp, model.heads) end
  if not model.mla and model.kv_heads % tp ~= 0 and tp % model.kv_heads ~= 0 then
    return false, ("tp %d neither divides nor is a multiple of %d KV heads"):format(tp, model.kv_heads)
  end
  return true
end

-- Bytes a stage holding layers [b, e) carries: its layers, plus the embedding on the first stage
-- and the LM head on the last. opts.kv_tokens adds that many tokens of KV cache per layer.
function M.stage_bytes(model, b, e, first, last, opts)
  local kv_tokens = (opts and opts.kv_tokens) or 0
  local bytes = 0
  for l = b, e - 1 do
    bytes = bytes + model.layer_bytes[l + 1] + kv_tokens * model.layer_kv_bytes_per_token[l + 1]
  end
  if first then bytes = bytes + model.embedding_bytes end
  if last then bytes = bytes + model.lm_head_bytes end
  return bytes
end

-- Contiguous split of the layers into `parts` stages that minimises the heaviest stage's bytes
-- (memory-balanced: the first stage also carries the embedding, the last the LM head, so they get
-- fewer layers). Exact (dynamic programming over split points). Returns a list of
-- {layer_begin, layer_end}. opts.by = "layers" splits by layer count only.
local split_cache = setmetatable({}, {__mode = "k"})  -- model -> key -> split (strategies ask per depth, per TP degree)

local function copy_split(s)
  local out = {}
  for i, r in ipairs(s) do out[i] = {r[1], r[2]} end
  return out
end

local balanced_split_uncached

function M.balanced_split(model, parts, opts)
  local key = ("%d/%s/%s"):format(parts, opts and opts.by or "", tostring(opts and opts.kv_tokens or 0))
  local per = split_cache[model]
  if not per then per = {}; split_cache[model] = per end
  if not per[key] then per[key] = balanced_split_uncached(model, parts, opts) end
  return copy_split(per[key])
end

balanced_split_uncached = function(model, parts, opts)
  local L = model.layers
  assert(parts >= 1 and parts <= L, ("balanced_split: %d parts for %d layers"):format(parts, L))
  if opts and opts.by == "layers" then
    local out, b = {}, 0
    for p = 1, parts do
      local e = b + (L - b) // (parts - p + 1)
      out[#out + 1] = {b, e}
      b = e
    end
    return out
  end
  local kv_tokens = (opts and opts.kv_tokens) or 0
  local prefix = {[0] = 0}
  for l = 1, L do
    prefix[l] = prefix[l - 1] + model.layer_bytes[l] + kv_tokens * model.layer_kv_bytes_per_token[l]
  end
  local function seg(i, j, p)  -- layers [i, j) as stage p of `parts`
    local b = prefix[j] - prefix[i]
    if p == 1 then b = b + model.embedding_bytes end
    if p == parts then b = b + model.lm_head_bytes end
    return b
  end
  -- best[p][j]: the smallest possible heaviest stage when layers [0, j) form stages 1..p.
  local best, cut = {}, {}
  best[1], cut[1] = {}, {}
  for j = 1, L do best[1][j] = seg(0, j, 1); cut[1][j] = 0 end
  for p = 2, parts do
    best[p], cut[p] = {}, {}
    for j = p, L do
      local bv, bi = math.huge, nil
      for i = p - 1, j - 1 do
        local v = math.max(best[p - 1][i], seg(i, j, p))
        if v < bv then bv, bi = v, i end
      end
      best[p][j], cut[p][j] = bv, bi
    end
  end
  local out, j = {}, L
  for p = parts, 1, -1 do
    local i = cut[p][j]
    table.insert(out, 1, {i, j})
    j = i
  end
  return out
end

return M
