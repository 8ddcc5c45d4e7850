-- Driven by tests/editors/test_editors_neovim.py (find usages): headless Neovim loads the shipped
-- config (editors/neovim/bsl-lens.lua), opens a module, waits for the server and the daemon, then
-- asks textDocument/references, textDocument/definition, textDocument/prepareCallHierarchy and
-- callHierarchy/incomingCalls|outgoingCalls at the positions given, both raw and through
-- Neovim's own handlers (vim.lsp.buf.references fills the quickfix list, vim.lsp.buf.definition
-- jumps), and writes what it got as JSON.
-- Inputs (environment): E2E_CONFIG, E2E_CMD (JSON list), E2E_INIT (JSON object), E2E_FILE,
-- E2E_CASES (JSON: {references, definition, hierarchy}: each {uri, line, character}), E2E_OUT.
local out = os.getenv("E2E_OUT")

local function finish(t)
  local f = assert(io.open(out, "w"))
  f:write(vim.fn.json_encode(t))
  f:close()
  vim.cmd("qall!")
end

local ok, err = pcall(function()
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
  local ready = vim.wait(60000, function()
    local st = bsl.status(10000)
    local f = st and st.folders and st.folders[1]
    return f ~= nil and f.state == "ready" and f.daemon ~= nil and f.daemon.state == "ready"
      and (f.daemon.references == nil or f.daemon.references.resolving == 0)
  end, 100)
  if not ready then
    error("the folder's daemon was not ready after 60 s")
  end
  local cases = vim.fn.json_decode(os.getenv("E2E_CASES"))
  local function at(c)
    return { textDocument = { uri = c.uri }, position = { line = c.line, character = c.character } }
  end
  local function request(method, params)
    local res = vim.lsp.buf_request_sync(0, method, params, 30000)
    if res == nil then
      return { error = "timeout" }
    end
    for _, r in pairs(res) do
      return { result = r.result, error = r.error }
    end
    return { error = "no answer" }
  end
  local got = { capabilities = {
    references = client.server_capabilities and client.server_capabilities.referencesProvider
      or client.resolved_capabilities and client.resolved_capabilities.find_references,
    call_hierarchy = client.server_capabilities and client.server_capabilities.callHierarchyProvider
      or client.resolved_capabilities and client.resolved_capabilities.call_hierarchy,
  } }
  local p = at(cases.references)
  p.context = { includeDeclaration = false }
  got.references = request("textDocument/references", p)
  got.definition = request("textDocument/definition", at(cases.definition))
  local items = request("textDocument/prepareCallHierarchy", at(cases.hierarchy))
  got.prepare = items
  if items.result and items.result[1] then
    got.incoming = request("callHierarchy/incomingCalls", { item = items.result[1] })
    got.outgoing = request("callHierarchy/outgoingCalls", { item = items.result[1] })
  end
  -- Neovim's own handlers: the quickfix list of references, the jump of definition
  vim.fn.setqflist({}, "r")
  local c = cases.references
  vim.cmd("edit " .. vim.fn.fnameescape(vim.uri_to_fname(c.uri)))
  vim.wait(10000, function() return #vim.lsp.buf_get_clients(0) > 0 end, 20)
  local line = vim.api.nvim_buf_get_lines(0, c.line, c.line + 1, false)[1]
  vim.api.nvim_win_set_cursor(0, { c.line + 1, vim.str_byteindex(line, c.character, true) })
  vim.lsp.buf.references({ includeDeclaration = false })
  vim.wait(30000, function() return #vim.fn.getqflist() > 0 end, 50)
  got.qflist = {}
  for _, it in ipairs(vim.fn.getqflist()) do
    table.insert(got.qflist, { file = vim.api.nvim_buf_get_name(it.bufnr), lnum = it.lnum, col = it.col, text = it.text })
  end
  vim.cmd("cclose")
  local d = cases.definition
  vim.cmd("edit " .. vim.fn.fnameescape(vim.uri_to_fname(d.uri)))
  vim.wait(10000, function() return #vim.lsp.buf_get_clients(0) > 0 end, 20)
  local dline = vim.api.nvim_buf_get_lines(0, d.line, d.line + 1, false)[1]
  vim.api.nvim_win_set_cursor(0, { d.line + 1, vim.str_byteindex(dline, d.character, true) })
  local from = vim.api.nvim_buf_get_name(0)
  vim.lsp.buf.definition()
  vim.wait(30000, function() return vim.api.nvim_buf_get_name(0) ~= from end, 50)
  local cur = vim.api.nvim_win_get_cursor(0)
  got.jump = { file = vim.api.nvim_buf_get_name(0), line = cur[1], col = cur[2] }
  finish({ ok = true, got = got })
end)
if not ok then
  finish({ ok = false, error = tostring(err) })
end
