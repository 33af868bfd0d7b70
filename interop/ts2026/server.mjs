// A 2026-07-28 test peer for agentctl: the TypeScript SDK v2 server
// (@modelcontextprotocol/server, pinned in interop/package.json) behind its
// own web-standard handler (createMcpHandler, modern only), served by
// node:http on 127.0.0.1:$PORT (internal/tspeer starts it with
// interop/loopback.cjs preloaded as well).
//
// Tools (each counts its executions, server side):
//   act  {n: number}  → structuredContent {done: true}
//   slow {n: number}  → one notifications/progress (when the request has a
//                       progress token), then {done: true}
// GET /counts answers the counts as JSON, e.g. {"act":1}.
import http from 'node:http';
import { McpServer, createMcpHandler } from '@modelcontextprotocol/server';
import * as z from 'zod';

const counts = {};
const count = name => {
    counts[name] = (counts[name] ?? 0) + 1;
};

function factory() {
    const server = new McpServer({ name: 'agentctl-ts2026', version: '0' });
    const input = z.object({ n: z.number() });
    const output = z.object({ done: z.boolean() });
    server.registerTool('act', { description: 'counts and answers done', inputSchema: input, outputSchema: output }, async ({ n }) => {
        count('act');
        return { content: [{ type: 'text', text: `done ${n}` }], structuredContent: { done: true } };
    });
    server.registerTool(
        'slow',
        { description: 'reports progress once, then answers done', inputSchema: input, outputSchema: output },
        async ({ n }, ctx) => {
            count('slow');
            const token = ctx.mcpReq._meta?.progressToken;
            if (token !== undefined) {
                await ctx.mcpReq.notify({ method: 'notifications/progress', params: { progressToken: token, progress: 1, total: 2 } });
            }
            return { content: [{ type: 'text', text: `done ${n}` }], structuredContent: { done: true } };
        }
    );
    return server;
}

const handler = createMcpHandler(factory, { legacy: 'reject' });

const server = http.createServer(async (req, res) => {
    if (req.method === 'GET' && req.url === '/counts') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(counts));
        return;
    }
    const abort = new AbortController();
    res.on('close', () => abort.abort());
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers)) {
        for (const x of Array.isArray(v) ? v : [v]) if (x !== undefined) headers.append(k, x);
    }
    const hasBody = req.method !== 'GET' && req.method !== 'HEAD';
    let response;
    try {
        response = await handler.fetch(
            new Request(`http://${req.headers.host}${req.url}`, {
                method: req.method,
                headers,
                body: hasBody ? Buffer.concat(chunks) : undefined,
                signal: abort.signal
            })
        );
    } catch (e) {
        res.writeHead(500, { 'content-type': 'text/plain' });
        res.end(String(e));
        return;
    }
    const out = {};
    response.headers.forEach((v, k) => {
        out[k] = v;
    });
    res.writeHead(response.status, out);
    if (response.body) {
        try {
            for await (const chunk of response.body) res.write(chunk);
        } catch {
            // the client went away
        }
    }
    res.end();
});
server.listen(Number(process.env.PORT ?? 3002), '127.0.0.1');
