/** Units a forecast can be given in. */
enum Units {
  Celsius = "c",
  Fahrenheit = "f",
}

namespace Format {
  export const temperature = (value: number, units: Units): string => `${value}${units === Units.Celsius ? "°C" : "°F"}`;
}

interface Window {
  from: string;
  to?: string;
}

class Forecaster {
  constructor(private readonly units: Units) {}

  describe(city: string, days: number): string {
    return `${city}: ${days} day(s) of sunshine, ${Format.temperature(21, this.units)}`;
  }
}

/**
 * A demonstration TypeScript tool: every parameter form toolexec understands.
 * It returns a JSON object describing what it received.
 * @param city - Name of the city.
 * @param {integer} days - How many days ahead.
 * @param units - Celsius or Fahrenheit.
 * @param tags - Labels to echo back.
 * @param window - An optional time window, as a nested object.
 * @param scores - A mapping from names to numbers.
 * @param note - An optional remark.
 * @title TypeScript demonstration
 * @tags demo
 * @readOnly
 * @openWorld false
 * @example {"city": "Paris", "days": 3, "units": "c"}
 */
export async function run(
  city: string,
  days: number = 1,
  units: "c" | "f" = "c",
  tags: string[] = [],
  window?: Window,
  scores?: Record<string, number>,
  note?: string | null,
): Promise<object> {
  const forecast = new Forecaster(units === "c" ? Units.Celsius : Units.Fahrenheit).describe(city, days);
  return { forecast, tags, window: window ?? null, scores: scores ?? {}, note: note ?? null, tool: process.env.LLM_TOOL_NAME };
}
