/**
 * Keep a model loaded.
 * @warm forever
 * @param prompt What to ask.
 */
export function run(prompt: string): string {
  return prompt;
}
