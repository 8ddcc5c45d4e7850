-- Driven by tests/editors/test_editors_neovim.py: headless Neovim loads the shipped config
-- (editors/neovim/bsl-lens.lua), opens a module of the export, waits for the server and
-- the daemon, asks workspace/symbol for each query, then runs the config's commands from
-- buffers that have no client (the quickfix window, a scratch buffer) and from a module of
-- a second export, and writes what it got as JSON.
-- Inputs (environment): E2E_CONFIG, E2E_CMD (JSON list), E2E_INIT (JSON object),
-- E2E_FILE, E2E_FILE2 (a module of a second export root), E2E_QUERIES (JSON list),
-- E2E_SEARCH (a search-by-meaning query), E2E_OUT.
local out = os.getenv("E2E_OUT")

local function finish(t)
  local f = assert(io.open(out, "w"))
  f:write(vim.fn.json_encode(t))
  f:close()
  vim.cmd("qall!")
end

local ok, err = pcall(function()
  local t0 = vim.loop.hrtime()
  local function elapsed()
    return (vim.loop.hrtime() - t0) / 1e9
  end
  local bsl = dofile(os.getenv("E2E_CONFIG"))
  bsl.setup({ cmd = vim.fn.json_decode(os.getenv("E2E_CMD")), init_options = vim.fn.json_decode(os.getenv("E2E_INIT")) })
  -- before any .bsl file is open: no server, and the command says so (without waiting)
  local before_any = vim.fn.execute("BslLensStatus")
  vim.cmd("edit " .. vim.fn.fnameescape(os.getenv("E2E_FILE")))

  local client
  local attached = vim.wait(30000, function()
    local get = vim.lsp.get_clients and function() return vim.lsp.get_clients({ bufnr = 0 }) end
      or function() return vim.lsp.buf_get_clients(0) end
    for _, c in pairs(get()) do
      client = c
    end
    return client ~= nil and client.initialized == true
  end, 20)
  if not attached then
    error("no initialized bsl-lens client attached to the buffer after 30 s")
  end
  local t_attached = elapsed()
  local filetype = vim.bo.filetype

  local st, st_err
  for _ = 1, 600 do
    st, st_err = bsl.status(10000)
    local f = st and st.folders and st.folders[1]
    if f and f.state == "ready" and f.daemon and f.daemon.state == "ready" then
      break
    end
    st = nil
    vim.wait(100)
  end
  if not st then
    error("the folder's daemon was not ready after 60 s: " .. vim.inspect(st_err))
  end
  local t_ready = elapsed()

  local results = {}
  for _, q in ipairs(vim.fn.json_decode(os.getenv("E2E_QUERIES"))) do
    local res = vim.lsp.buf_request_sync(0, "workspace/symbol", { query = q }, 30000)
    local got = { query = q }
    for _, r in pairs(res or {}) do
      got.result = r.result
      got.error = r.error
    end
    if res == nil then
      got.error = "timeout"
    end
    table.insert(results, got)
  end
  -- The commands from buffers without a client: they must find the server by root.
  local notes = {}
  vim.notify = function(msg, level)
    table.insert(notes, { msg = tostring(msg), level = level })
  end
  local function wait_ready(n)
    local st2
    vim.wait(60000, function()
      st2 = bsl.status(10000)
      local ready = 0
      for _, f in ipairs((st2 or {}).folders or {}) do
        if f.state == "ready" and type(f.daemon) == "table" and f.daemon.state == "ready" then
          ready = ready + 1
        end
      end
      return ready >= n
    end, 100)
    return st2
  end
  local function qf_after(cmd)
    local before = vim.fn.getqflist({ id = 0 }).id
    local from = { buftype = vim.bo.buftype, name = vim.api.nvim_buf_get_name(0) }
    vim.cmd(cmd)
    local done = vim.wait(30000, function()
      return vim.fn.getqflist({ id = 0 }).id ~= before
    end, 20)
    local items = {}
    for _, it in ipairs(vim.fn.getqflist()) do
      table.insert(items, { filename = vim.api.nvim_buf_get_name(it.bufnr), lnum = it.lnum, text = it.text })
    end
    return { from = from, done = done, title = vim.fn.getqflist({ title = 0 }).title, items = items, notes = vim.deepcopy(notes) }
  end
  local commands = {}

  -- a second export: its own client and daemon
  vim.cmd("edit " .. vim.fn.fnameescape(os.getenv("E2E_FILE2")))
  vim.wait(30000, function()
    return #bsl.clients() >= 2 and bsl.clients()[2].initialized == true
  end, 20)
  commands.clients = {}
  for _, c in ipairs(bsl.clients()) do
    table.insert(commands.clients, c.config.root_dir)
  end
  wait_ready(2)
  commands.search_from_second = qf_after("BslLensSearch " .. os.getenv("E2E_SEARCH"))

  -- the quickfix window (opened by the search): status and reindex
  vim.cmd("copen")
  commands.status_from = { buftype = vim.bo.buftype, name = vim.api.nvim_buf_get_name(0) }
  commands.status_text = vim.fn.execute("BslLensStatus")
  commands.status = bsl.status(10000)
  notes = {}
  vim.cmd("BslLensReindex")
  vim.wait(30000, function()
    return #notes > 0
  end, 20)
  commands.reindex = { from = vim.bo.buftype, notes = notes }

  -- a scratch buffer: search goes to the first server
  vim.cmd("enew")
  vim.bo.buftype = "nofile"
  notes = {}
  commands.search_from_scratch = qf_after("BslLensSearch " .. os.getenv("E2E_SEARCH"))

  finish({
    ok = true,
    nvim = vim.version(),
    client = client.name,
    filetype = filetype,
    root = client.config.root_dir,
    offset_encoding = client.offset_encoding,
    attached_s = t_attached,
    ready_s = t_ready,
    total_s = elapsed(),
    index_dir = st.folders[1].indexDir,
    results = results,
    commands = commands,
    status_before_any = before_any,
  })
end)
if not ok then
  finish({ ok = false, error = tostring(err) })
end
