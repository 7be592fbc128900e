import { describe, expect, it } from "vitest";
import { callerBinding, checkCaller } from "../../../src/registry/caller-binding.js";

const grant = (endpoint: string) => ({ engineId: "e", owner: "team", binding: callerBinding(endpoint) });

describe("host-token caller binding compares addresses in one spelling", () => {
  it("an IPv6 engine calls back under another spelling of its address, or an IPv4 one mapped into IPv6", () => {
    expect(() => checkCaller(grant("[2001:DB8:0:0::1]:50051"), { peer: "[2001:db8::1]:40000" })).not.toThrow();
    expect(() => checkCaller(grant("10.1.2.3:50051"), { peer: "[::ffff:10.1.2.3]:40000" })).not.toThrow();
  });

  it("another address, and a remote caller of a loopback engine, are refused", () => {
    expect(() => checkCaller(grant("[2001:db8::1]:50051"), { peer: "[2001:db8::2]:40000" })).toThrow(/valid only from the engine's address "2001:db8::1"/);
    expect(() => checkCaller(grant("127.0.0.1:50051"), { peer: "10.1.2.3:40000" })).toThrow(/loopback address or a unix socket/);
    expect(() => checkCaller(grant("127.0.0.1:50051"), { peer: "127.0.0.2:40000" })).not.toThrow();
  });
});
