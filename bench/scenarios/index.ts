/** Every scenario, in the order `npm run bench` runs them. */
import type { Scenario } from "../harness/scenario.js";
import { appendThroughput } from "./append_throughput.js";
import { assembleScaling } from "./assemble_scaling.js";
import { assembleUnderLoad } from "./assemble_under_load.js";
import { budgetUtilization } from "./budget_utilization.js";
import { compactionQuality } from "./compaction_quality.js";
import { compactionDeadline } from "./compaction_deadline.js";
import { failover } from "./failover.js";
import { memory } from "./memory.js";
import { noisyNeighbor } from "./noisy_neighbor.js";
import { tokenizer } from "./tokenizer.js";
import { gatewayOverhead } from "./gateway_overhead.js";
import { observabilityOverhead } from "./observability_overhead.js";
import { search } from "./search.js";
import { promptCache } from "./prompt_cache.js";

export const SCENARIOS: Scenario[] = [
  gatewayOverhead,
  observabilityOverhead,
  assembleScaling,
  assembleUnderLoad,
  noisyNeighbor,
  appendThroughput,
  search,
  failover,
  compactionDeadline,
  compactionQuality,
  budgetUtilization,
  promptCache,
  memory,
  tokenizer,
];
