/**
 * Protobuf wire bytes by hand, and a raw unary call that sends them as they are — for requests no
 * generated encoder would write (invalid UTF-8 in a string, 64-bit values past what JS numbers hold).
 */
import { Client, credentials, Metadata, type ServiceError } from "@grpc/grpc-js";

export function varint(value: bigint): Buffer {
  let v = BigInt.asUintN(64, value); // negative int64s are sent as their two's complement
  const out: number[] = [];
  do {
    let byte = Number(v & 0x7fn);
    v >>= 7n;
    if (v) byte |= 0x80;
    out.push(byte);
  } while (v);
  return Buffer.from(out);
}

/** A varint field. */
export const int = (field: number, value: bigint): Buffer => Buffer.concat([varint(BigInt(field << 3)), varint(value)]);

/** A length-delimited field (string, bytes or a nested message). */
export const bytes = (field: number, value: Buffer | string): Buffer => {
  const body = typeof value === "string" ? Buffer.from(value, "utf8") : value;
  return Buffer.concat([varint(BigInt((field << 3) | 2)), varint(BigInt(body.length)), body]);
};

export const message = (...fields: Buffer[]): Buffer => Buffer.concat(fields);

/** Calls `/contextd.v1.SessionService/<method>` with these exact request bytes. */
export function rawSessionCall(address: string, method: string, body: Buffer, token: string): Promise<{ code: number; details: string }> {
  const client = new Client(address, credentials.createInsecure());
  const md = new Metadata();
  md.set("authorization", `Bearer ${token}`);
  const same = (b: Buffer) => b;
  return new Promise((resolve) => {
    client.makeUnaryRequest(`/contextd.v1.SessionService/${method}`, same, same, body, md, { deadline: Date.now() + 10_000 }, (err: ServiceError | null) => {
      client.close();
      resolve(err ? { code: err.code, details: err.details } : { code: 0, details: "" });
    });
  });
}
