import { readFileSync } from "node:fs";
import { credentials as channelCredentials, ServerCredentials, type ChannelCredentials } from "@grpc/grpc-js";

export interface TlsSettings {
  cert_file: string;
  key_file: string;
  client_ca_file?: string;
  require_client_cert?: boolean;
}

export interface EngineTlsSettings {
  ca_file?: string;
  cert_file?: string;
  key_file?: string;
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

/** How the registry dials engines: plaintext, or TLS (with a client certificate for mTLS). */
export function engineCredentials(tls: EngineTlsSettings | undefined): ChannelCredentials {
  if (!tls) return channelCredentials.createInsecure();
  const read = (file?: string) => (file ? readFileSync(file) : null);
  return channelCredentials.createSsl(read(tls.ca_file), read(tls.key_file), read(tls.cert_file));
}
