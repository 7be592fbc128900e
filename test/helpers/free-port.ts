/**
 * Ports for tests that need a fixed address (e.g. "contextd exits non-zero when the port is taken",
 * or an engine endpoint known before its sidecar starts). Most tests should listen on port 0 instead.
 */
import net from "node:net";

/** A TCP port that was free on `host` a moment ago (bind to 0, read the port, close). */
export function getFreePort(host = "127.0.0.1"): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.once("error", reject);
    srv.listen(0, host, () => {
      const addr = srv.address();
      const port = typeof addr === "object" && addr ? addr.port : 0;
      srv.close(() => (port ? resolve(port) : reject(new Error("could not read the bound port"))));
    });
  });
}

/**
 * Holds a port open until `release()` — to make a server's bind fail with "address in use".
 * Resolves with the port and the `host:port` address.
 */
export async function occupyPort(host = "127.0.0.1"): Promise<{ port: number; address: string; release(): Promise<void> }> {
  const srv = net.createServer((socket) => socket.destroy());
  await new Promise<void>((resolve, reject) => {
    srv.once("error", reject);
    srv.listen(0, host, () => resolve());
  });
  const addr = srv.address();
  const port = typeof addr === "object" && addr ? addr.port : 0;
  return {
    port,
    address: `${host}:${port}`,
    release: () => new Promise<void>((resolve) => srv.close(() => resolve())),
  };
}
