import pino, { type Logger } from "pino";

/** JSON logs on stdout (pino). Request id, session id and engine id are added by child loggers. */
export function createLogger(level: string, name = "contextd"): Logger {
  return pino({ name, level, base: { pid: process.pid }, timestamp: pino.stdTimeFunctions.isoTime });
}
