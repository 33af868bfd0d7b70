// loopback.cjs — a `node --require` preload that forces every TCP listen in
// the process onto 127.0.0.1.
//
// The reference "everything" server calls app.listen(PORT), which binds all
// interfaces, and it has a tool (get-env) that returns its whole environment.
// agentctl's tests therefore start it with a scrubbed environment AND this
// preload, so it is never reachable from another machine.
//
// Covered: net.Server.prototype.listen, which http.Server, https.Server and
// express inherit. Every port form (listen(port[, host][, backlog][, cb]),
// listen({port, host, ...}[, cb]), listen() / listen(cb)) is rewritten to
// host 127.0.0.1 whatever host was asked for. IPC paths (unix sockets) are
// left alone; listening on an inherited handle or fd is refused.
"use strict";

const net = require("node:net");

const HOST = "127.0.0.1";
const original = net.Server.prototype.listen;

function isPort(v) {
  return typeof v === "number" || (typeof v === "string" && /^\d+$/.test(v));
}

function loopbackListen(...args) {
  const cb = typeof args[args.length - 1] === "function" ? args.pop() : undefined;
  const first = args[0];
  let options;
  if (first === undefined || first === null || isPort(first)) {
    // listen([port][, host][, backlog])
    options = { port: first == null ? 0 : Number(first) };
    let rest = args.slice(1);
    if (typeof rest[0] === "string" || rest[0] === undefined || rest[0] === null) {
      rest = rest.slice(1); // the requested host is ignored
    }
    if (typeof rest[0] === "number") {
      options.backlog = rest[0];
    }
  } else if (typeof first === "string") {
    // listen(path[, backlog]): an IPC endpoint, not reachable over the network.
    return cb ? original.call(this, ...args, cb) : original.apply(this, args);
  } else if (typeof first === "object") {
    if (first.path !== undefined && first.port === undefined) {
      return cb ? original.call(this, ...args, cb) : original.apply(this, args);
    }
    if (first.port === undefined && (first.fd !== undefined || first._handle !== undefined || first.handle !== undefined)) {
      throw new Error("loopback.cjs: listening on an inherited handle or fd is refused");
    }
    options = { ...first };
  } else {
    throw new Error(`loopback.cjs: unsupported listen arguments: ${typeof first}`);
  }
  options.host = HOST;
  delete options.ipv6Only;
  return cb ? original.call(this, options, cb) : original.call(this, options);
}

net.Server.prototype.listen = loopbackListen;

// http.Server (and friends) inherit listen from net.Server; make sure none of
// them carries an own override that would bypass the patch.
for (const mod of ["node:http", "node:https"]) {
  const S = require(mod).Server;
  if (Object.prototype.hasOwnProperty.call(S.prototype, "listen")) {
    S.prototype.listen = loopbackListen;
  }
}
