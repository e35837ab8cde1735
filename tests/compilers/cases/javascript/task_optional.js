/**
 * Render the video.
 * @task optional
 * @param {string} file The video to render.
 */
export async function run(file) {
  return `rendered ${file}`;
}
