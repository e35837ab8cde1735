/**
 * Push a repository.
 * @scope repo:write
 * @param repo - the repository
 */
export function run(repo: string): string {
  return repo;
}
