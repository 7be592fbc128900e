/**
 * A throwaway PKI for TLS tests, made with the system's `openssl` in a temp dir: certificate
 * authorities, and leaf certificates they sign (P-256 keys, valid for a day). Server certificates
 * carry subjectAltName IP:127.0.0.1 and DNS:localhost; client certificates the clientAuth usage
 * and their name as subject CN.
 *
 *   const pki = createPki();
 *   const ca = pki.ca("test-ca");
 *   const server = pki.leaf(ca, "contextd", "server");
 *   const client = pki.leaf(ca, "acme", "client");   // { cert, key } file paths
 */
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

export interface CertFiles {
  cert: string;
  key: string;
}

export interface Pki {
  dir: string;
  ca(name: string): CertFiles;
  leaf(ca: CertFiles, name: string, kind: "server" | "client"): CertFiles;
  /** Reads a file of the PKI (grpc-js credentials take buffers). */
  read(file: string): Buffer;
  remove(): void;
}

export function createPki(): Pki {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "contextd-pki-"));
  const openssl = (...args: string[]): void => void execFileSync("openssl", args, { cwd: dir, stdio: ["ignore", "ignore", "pipe"] });
  const files = (name: string): CertFiles => ({ cert: path.join(dir, `${name}.crt`), key: path.join(dir, `${name}.key`) });
  const newKey = (file: string): void => openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", file);
  let serial = 1;
  return {
    dir,
    ca(name) {
      const f = files(`ca-${name}`);
      newKey(f.key);
      openssl(
        "req",
        "-x509",
        "-new",
        "-key",
        f.key,
        "-out",
        f.cert,
        "-days",
        "1",
        "-subj",
        `/CN=${name}`,
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
      );
      return f;
    },
    leaf(ca, name, kind) {
      const f = files(`${kind}-${name}-${serial}`);
      const csr = path.join(dir, `${kind}-${name}-${serial}.csr`);
      const ext = path.join(dir, `${kind}-${name}-${serial}.ext`);
      newKey(f.key);
      openssl("req", "-new", "-key", f.key, "-out", csr, "-subj", `/CN=${name}`);
      fs.writeFileSync(
        ext,
        kind === "server"
          ? "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n"
          : "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=clientAuth\n",
      );
      openssl("x509", "-req", "-in", csr, "-CA", ca.cert, "-CAkey", ca.key, "-set_serial", String(serial++), "-out", f.cert, "-days", "1", "-extfile", ext);
      return f;
    },
    read: (file) => fs.readFileSync(file),
    remove: () => fs.rmSync(dir, { recursive: true, force: true }),
  };
}
