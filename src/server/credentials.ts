import { readFileSync } from "node:fs";
import { ServerCredentials } from "@grpc/grpc-js";

export interface TlsSettings {
  cert_file: string;
  key_file: string;
  client_ca_file?: string;
  require_client_cert?: boolean;
}

/** Plaintext for local development; TLS, or mTLS with a client CA, when configured. */
export function serverCredentials(tls: TlsSettings | undefined): ServerCredentials {
  if (!tls) return ServerCredentials.createInsecure();
  const ca = tls.client_ca_file ? readFileSync(tls.client_ca_file) : null;
  return ServerCredentials.createSsl(
    ca,
    [{ cert_chain: readFileSync(tls.cert_file), private_key: readFileSync(tls.key_file) }],
    Boolean(tls.require_client_cert && ca),
  );
}
