/*
 * A search for one clause ID (`SEG-5`, `swa-1`) finds that clause first.
 *
 * The search appends `*` to every term, so `SEG-5` is searched as `seg` and any term starting
 * with `5` (the section title `5. alloc_extend`; `SWA-1` would match `SWA-19`). Quoted, the ID
 * is searched as written. Material for MkDocs runs the search in a web worker: this wraps
 * `Worker.prototype.postMessage` and quotes the query of a query message
 * (`{type: 2, data: "SEG-5"}`, Material's `SearchMessageType.QUERY`) that is one clause ID.
 * `tools/docs_check.py` checks the result in a browser.
 */
(() => {
  const QUERY = 2;
  const CLAUSE_ID = /^\s*([A-Za-z]+-\d+)\s*$/;
  const post = Worker.prototype.postMessage;
  Worker.prototype.postMessage = function (message, ...rest) {
    if (message && message.type === QUERY && typeof message.data === "string") {
      const id = CLAUSE_ID.exec(message.data);
      if (id) message = { ...message, data: `"${id[1]}"` };
    }
    return post.call(this, message, ...rest);
  };
})();
