-- Driven by tests/test_editors_neovim.py: headless Neovim loads the shipped config
-- (editors/neovim/bsl-lens.lua), opens a module of the export, waits for the server and
-- the daemon, asks workspace/symbol for each query and writes what it got as JSON.
-- Inputs (environment): E2E_CONFIG, E2E_CMD (JSON list), E2E_INIT (JSON object),
-- E2E_FILE, E2E_QUERIES (JSON list), E2E_OUT.
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
  finish({
    ok = true,
    nvim = vim.version(),
    client = client.name,
    filetype = vim.bo.filetype,
    root = client.config.root_dir,
    offset_encoding = client.offset_encoding,
    attached_s = t_attached,
    ready_s = t_ready,
    total_s = elapsed(),
    index_dir = st.folders[1].indexDir,
    results = results,
  })
end)
if not ok then
  finish({ ok = false, error = tostring(err) })
end
