import { z } from "zod";
import { configSchema } from "./config-schema.js";

/**
 * The shape of the config file — which sections, maps and lists exist at a key path, and which keys a
 * section allows — for what the schema itself cannot answer: mapping an env variable's name
 * (`CONTEXTD_ENGINES__TIMEOUTS__COMPACT`) onto a path before anything is parsed, and suggesting the key
 * a misspelt one meant.
 *
 * It is read from the schema's JSON Schema (`z.toJSONSchema`, zod's public rendering of it, computed
 * once), not from zod's internal definitions, so a zod upgrade cannot change it silently. The input
 * side is rendered: the shape a file is written in. Refinements and transforms have no JSON Schema
 * form and are left out (`unrepresentable: "any"`); they never change which keys exist.
 */

/** A section (fixed keys), a map (any key, one value schema) or a list. */
export type ContainerKind = "section" | "map" | "list";

export interface Container {
  readonly kind: ContainerKind;
  /** The keys a section allows; empty for maps and lists. */
  readonly keys: readonly string[];
}

/** The parts of JSON Schema `z.toJSONSchema` writes for objects, records, arrays and unions. */
interface SchemaNode {
  type?: string | string[];
  properties?: Record<string, SchemaNode>;
  additionalProperties?: SchemaNode | boolean;
  items?: SchemaNode | SchemaNode[];
  prefixItems?: SchemaNode[];
  anyOf?: SchemaNode[];
  oneOf?: SchemaNode[];
  allOf?: SchemaNode[];
}

const root = z.toJSONSchema(configSchema, { io: "input", unrepresentable: "any", reused: "inline" }) as SchemaNode;

/** A union's options (a discriminated union is `oneOf`, an optional value may be `anyOf`), else the node. */
function alternatives(node: SchemaNode): SchemaNode[] {
  const options = [...(node.anyOf ?? []), ...(node.oneOf ?? []), ...(node.allOf ?? [])];
  return options.length > 0 ? options.flatMap(alternatives) : [node];
}

function kindOf(node: SchemaNode): ContainerKind | undefined {
  const types = Array.isArray(node.type) ? node.type : [node.type];
  if (types.includes("array") || node.items !== undefined) return "list";
  if (!types.includes("object") && node.properties === undefined) return undefined;
  return typeof node.additionalProperties === "object" ? "map" : "section";
}

function childrenAt(node: SchemaNode, seg: PropertyKey): SchemaNode[] {
  switch (kindOf(node)) {
    case "section": {
      const child = node.properties?.[String(seg)];
      return child ? [child] : [];
    }
    case "map":
      return [node.additionalProperties as SchemaNode];
    case "list":
      if (typeof seg !== "number") return [];
      if (Array.isArray(node.items)) return node.items[seg] ? [node.items[seg]] : [];
      return node.items ? [node.items] : [];
    default:
      return [];
  }
}

/** The containers at `path` (a union contributes each option); empty when the path cannot exist or holds a single value. */
export function containersAt(path: readonly PropertyKey[]): Container[] {
  let nodes = alternatives(root);
  for (const seg of path) nodes = nodes.flatMap((n) => childrenAt(n, seg)).flatMap(alternatives);
  return nodes.flatMap((n) => {
    const kind = kindOf(n);
    return kind ? [{ kind, keys: kind === "section" ? Object.keys(n.properties ?? {}) : [] }] : [];
  });
}

/** The keys the sections at `path` allow (every option of a union contributes its keys). */
export function knownKeys(path: readonly PropertyKey[]): string[] {
  return [...new Set(containersAt(path).flatMap((c) => c.keys))];
}
