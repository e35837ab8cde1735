import { execSync } from "node:child_process";

/**
 * Run a git command in the current directory.
 * @param args - The arguments to git, e.g. "status --short".
 */
export function run(args: string): string {
  return execSync(`git ${args}`).toString();
}
