/**
 * Train the model.
 * @task required
 * @param epochs How many passes.
 */
export async function run(epochs: number): Promise<string> {
  return `trained ${epochs}`;
}
