// Runs once before all suites. Kept small: per-suite databases are made by the harness.
export default function setup(): void {
  process.env.LOG_LEVEL ??= "silent"
}
