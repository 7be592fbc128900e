import { ImageBlock, TextBlock, ThinkingBlock, ToolCallBlock, type ContentBlock } from "../contract/gen/contextd/v1/types.js";
import { isRecord, isString, type Json, type JsonObject } from "./json.js";
import { compact, extraJsonOf, parseExtra, restore } from "./lossless.js";

/**
 * OpenClaw content blocks ↔ contextd ContentBlocks. OpenClaw has four block types (its
 * `packages/llm-core` types): `text {text, textSignature?}`, `thinking {thinking,
 * thinkingSignature?, redacted?}`, `toolCall {id, name, arguments, thoughtSignature?, ...}` and
 * `image {data (base64), mimeType}`. Every other field, and any block of another type (foreign
 * transcripts carry `toolUse` or `functionCall` blocks), survives in the block's `extra_json`
 * (see lossless.ts): an unknown block travels as an empty text block whose extra restores it.
 */
export function toContentBlock(block: unknown): ContentBlock {
  // A bare string in a content array is kept as such: it restores from extra.
  const original: JsonObject = isRecord(block) ? block : { [STRING_BLOCK_KEY]: block as Json };
  const mapped = forward(original);
  const extraJson = extraJsonOf(original, rebuild(mapped));
  if (extraJson) mapped.block!.value.extraJson = extraJson;
  return mapped;
}

export function fromContentBlock(block: ContentBlock): Json {
  const extra = parseExtra(block.block?.value.extraJson ?? "");
  const out = restore(rebuild(block), extra);
  return Object.hasOwn(out, STRING_BLOCK_KEY) && Object.keys(out).length === 1 ? out[STRING_BLOCK_KEY] : out;
}

// A content array member that is not an object (never written by OpenClaw, but JSON allows it).
const STRING_BLOCK_KEY = "contextd.value";

function forward(b: JsonObject): ContentBlock {
  switch (b.type) {
    case "text":
      return { block: { $case: "text", value: TextBlock.fromPartial({ text: str(b.text), signature: str(b.textSignature) }) } };
    case "thinking":
      return {
        block: {
          $case: "thinking",
          value: ThinkingBlock.fromPartial({ thinking: str(b.thinking), signature: str(b.thinkingSignature), redacted: b.redacted === true }),
        },
      };
    case "toolCall":
      return {
        block: {
          $case: "toolCall",
          value: ToolCallBlock.fromPartial({
            id: str(b.id),
            name: str(b.name),
            argumentsJson: b.arguments === undefined ? "" : JSON.stringify(b.arguments),
            signature: str(b.thoughtSignature),
          }),
        },
      };
    case "image":
      return {
        block: {
          $case: "image",
          value: ImageBlock.fromPartial({ mimeType: str(b.mimeType), data: isString(b.data) ? Buffer.from(b.data, "base64") : Buffer.alloc(0) }),
        },
      };
    default:
      return { block: { $case: "text", value: TextBlock.fromPartial({}) } };
  }
}

/** The OpenClaw block the proto fields alone describe (required fields always, optional ones when set). */
function rebuild(block: ContentBlock): JsonObject {
  const b = block.block;
  if (!b) return {};
  switch (b.$case) {
    case "text":
      return compact({ type: "text", text: b.value.text, textSignature: b.value.signature || undefined });
    case "thinking":
      return compact({
        type: "thinking",
        thinking: b.value.thinking,
        thinkingSignature: b.value.signature || undefined,
        redacted: b.value.redacted || undefined,
      });
    case "toolCall":
      return compact({
        type: "toolCall",
        id: b.value.id,
        name: b.value.name,
        arguments: b.value.argumentsJson ? (parseJson(b.value.argumentsJson) ?? {}) : undefined,
        thoughtSignature: b.value.signature || undefined,
      });
    case "image":
      return compact({ type: "image", data: Buffer.from(b.value.data).toString("base64"), mimeType: b.value.mimeType });
  }
}

function str(v: unknown): string {
  return isString(v) ? v : "";
}

/** Arguments an engine wrote may not be JSON; then the runtime gets an empty object. */
function parseJson(text: string): Json | undefined {
  try {
    return JSON.parse(text) as Json;
  } catch {
    return undefined;
  }
}
