import { env } from "node:process";

/**
 * Count a batch of things.
 *
 * @param label - The batch's label
 * @param size - How many are in it
 * @param weight - The weight of one, in grams
 * @param kind - The condition
 * @param notes - Remarks on the batch
 * @param rush - Whether it is urgent
 */
export function count_batch(
  label: string,
  size: number,
  weight?: number,
  kind: "new" | "used" = "new",
  notes: string[] = [],
  rush: boolean | null = false,
): Record<string, unknown> {
  return { label, size, weight, kind, notes, rush };
}

/**
 * Report what the tally's functions see of their environment.
 */
export async function show_env(): Promise<string> {
  const names = ["LLM_AGENT_NAME", "LLM_AGENT_FUNC", "LLM_AGENT_ROOT_DIR", "LLM_AGENT_CACHE_DIR", "LLM_ROOT_DIR",
    "LLM_AGENT_RAW_JSON", "LLM_AGENT_VAR_TEAM", "LLM_AGENT_VAR_UNIT", "ROOT_ENV", "AGENT_ENV", "SHARED_ENV"];
  return names.map((name) => `${name}=${env[name] ?? ""}\n`).join("") + `PATH=${env.PATH}\n`;
}

/** Count by keys. */
export function countBy(keys: Array<string>, options: Record<string, number>): unknown {
  return { keys, options };
}

function _tally(): number {
  return 0;
}

export function _instructions(): string {
  return `You count ${env.LLM_AGENT_VAR_UNIT} for team ${env.LLM_AGENT_VAR_TEAM}.`;
}
