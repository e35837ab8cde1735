/** Search the notes asynchronously. */
export async function run(query: string): Promise<string> {
  return query;
}
