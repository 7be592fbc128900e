// The SDK's outgoing calls go through contextd's one client-call path (src/contract/client-call.ts).
export {
  CHANNEL_OPTIONS,
  callUnary,
  channelCredentials,
  tlsCredentials,
  type CallOptions,
  type ClientOptions,
  type UnaryMethod,
} from "../contract/client-call.js";
