// Types of error-reasons.mjs for the tests that import it (test/unit/contract/*.test.ts).
export interface ErrorReasonValue {
  name: string;
  number: number;
  /** The status codes the value's comment starts with; [] when it names none (HOST_CALL_FAILED). */
  codes: string[];
  /** The comment after the codes. */
  text: string;
}
export const START: string;
export const END: string;
export function parseErrorReasons(proto: string): ErrorReasonValue[];
export function renderErrorReasons(proto: string): string;
export function replaceErrorReasons(markdown: string, proto: string): string;
