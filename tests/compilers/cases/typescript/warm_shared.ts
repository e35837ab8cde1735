/**
 * Keep a model loaded.
 * @warm shared
 * @param prompt What to ask.
 */
export async function run(prompt: string): Promise<string> {
  return prompt;
}
