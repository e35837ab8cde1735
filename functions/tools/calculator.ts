// A calculator with a real parser: the expression is tokenised and read by recursive descent,
// never handed to eval or Function. Work is bounded: the text is at most 1000 characters, nesting
// at most 64 levels, and every intermediate result must be a finite number (so 10 ** 1e9 is an
// error, not a hang or "Infinity").

const MAX_LENGTH = 1000;
const MAX_DEPTH = 64;

/** What the calculator returns. */
interface Calculation {
  expression: string;
  value: number;
}

type Fn = { arity: [number, number]; apply: (args: number[]) => number };

const FUNCTIONS: Record<string, Fn> = {
  sqrt: { arity: [1, 1], apply: ([x]) => Math.sqrt(x) },
  abs: { arity: [1, 1], apply: ([x]) => Math.abs(x) },
  round: { arity: [1, 1], apply: ([x]) => Math.round(x) },
  floor: { arity: [1, 1], apply: ([x]) => Math.floor(x) },
  ceil: { arity: [1, 1], apply: ([x]) => Math.ceil(x) },
  sin: { arity: [1, 1], apply: ([x]) => Math.sin(x) },
  cos: { arity: [1, 1], apply: ([x]) => Math.cos(x) },
  tan: { arity: [1, 1], apply: ([x]) => Math.tan(x) },
  log: { arity: [1, 1], apply: ([x]) => Math.log(x) },
  log2: { arity: [1, 1], apply: ([x]) => Math.log2(x) },
  log10: { arity: [1, 1], apply: ([x]) => Math.log10(x) },
  exp: { arity: [1, 1], apply: ([x]) => Math.exp(x) },
  pow: { arity: [2, 2], apply: ([x, y]) => Math.pow(x, y) },
  min: { arity: [1, 100], apply: (xs) => Math.min(...xs) },
  max: { arity: [1, 100], apply: (xs) => Math.max(...xs) },
};
const CONSTANTS: Record<string, number> = { PI: Math.PI, E: Math.E };

class CalcError extends Error {
  constructor(message: string, readonly position: number) {
    super(message);
  }
}

interface Token {
  kind: "number" | "name" | "op" | "end";
  text: string;
  at: number; // 0-based offset
}

function tokenize(text: string): Token[] {
  const tokens: Token[] = [];
  const pattern = /\s*(?:(\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)|([A-Za-z_]\w*)|(\*\*|[-+*/%(),]))/y;
  let at = 0;
  while (at < text.length) {
    if (/^\s*$/.test(text.slice(at))) break;
    pattern.lastIndex = at;
    const match = pattern.exec(text);
    if (!match) {
      const start = at + (text.slice(at).length - text.slice(at).trimStart().length);
      const char = text[start];
      const hint = char === "^" ? "; use ** for powers" : "";
      throw new CalcError(`unexpected character '${char}'${hint}`, start);
    }
    const start = match.index + match[0].length - (match[1] ?? match[2] ?? match[3]).length;
    tokens.push({ kind: match[1] ? "number" : match[2] ? "name" : "op", text: match[1] ?? match[2] ?? match[3], at: start });
    at = pattern.lastIndex;
  }
  tokens.push({ kind: "end", text: "end of expression", at: text.length });
  return tokens;
}

class Parser {
  private index = 0;
  private depth = 0;

  constructor(private readonly tokens: Token[]) {}

  parse(): number {
    const value = this.additive();
    const next = this.peek();
    if (next.kind !== "end") throw new CalcError(`unexpected '${next.text}'`, next.at);
    return value;
  }

  private peek(): Token {
    return this.tokens[this.index];
  }

  private take(): Token {
    return this.tokens[this.index++];
  }

  private expect(text: string): Token {
    const token = this.take();
    if (token.text !== text) throw new CalcError(`expected '${text}' but found '${token.text}'`, token.at);
    return token;
  }

  private nested<T>(at: number, read: () => T): T {
    if (++this.depth > MAX_DEPTH) throw new CalcError(`the expression nests deeper than ${MAX_DEPTH} levels`, at);
    try {
      return read();
    } finally {
      this.depth--;
    }
  }

  private additive(): number {
    let value = this.multiplicative();
    while (this.peek().text === "+" || this.peek().text === "-") {
      const op = this.take();
      const right = this.multiplicative();
      value = checked(op.text === "+" ? value + right : value - right, op.at);
    }
    return value;
  }

  private multiplicative(): number {
    let value = this.unary();
    while (["*", "/", "%"].includes(this.peek().text)) {
      const op = this.take();
      const right = this.unary();
      if (op.text !== "*" && right === 0) {
        throw new CalcError(op.text === "/" ? "division by zero" : "modulo by zero", op.at);
      }
      value = checked(op.text === "*" ? value * right : op.text === "/" ? value / right : value % right, op.at);
    }
    return value;
  }

  private unary(): number {
    const token = this.peek();
    if (token.text === "-" || token.text === "+") {
      this.take();
      return this.nested(token.at, () => (token.text === "-" ? -this.unary() : this.unary()));
    }
    return this.power();
  }

  private power(): number {
    const base = this.primary();
    if (this.peek().text !== "**") return base;
    const op = this.take();
    // Right-associative, and binds tighter than a unary minus on its left: -2 ** 2 is -4.
    const exponent = this.nested(op.at, () => this.unary());
    return checked(Math.pow(base, exponent), op.at);
  }

  private primary(): number {
    const token = this.take();
    if (token.kind === "number") return checked(Number(token.text), token.at);
    if (token.text === "(") {
      const value = this.nested(token.at, () => this.additive());
      this.expect(")");
      return value;
    }
    if (token.kind === "name") return this.named(token);
    const what = token.kind === "end" ? "the expression ended early" : `unexpected '${token.text}'`;
    throw new CalcError(`${what}; expected a number, a name or '('`, token.at);
  }

  private named(token: Token): number {
    if (Object.hasOwn(CONSTANTS, token.text)) return CONSTANTS[token.text];
    if (!Object.hasOwn(FUNCTIONS, token.text)) {
      const known = [...Object.keys(CONSTANTS), ...Object.keys(FUNCTIONS)];
      const close = known.find((name) => name.toLowerCase() === token.text.toLowerCase());
      throw new CalcError(`unknown name '${token.text}'${close ? `; did you mean '${close}'?` : `; known: ${known.join(", ")}`}`, token.at);
    }
    const fn = FUNCTIONS[token.text];
    this.expect("(");
    const args: number[] = [];
    if (this.peek().text !== ")") {
      do {
        if (args.length) this.take();
        args.push(this.nested(token.at, () => this.additive()));
      } while (this.peek().text === ",");
    }
    this.expect(")");
    const [least, most] = fn.arity;
    if (args.length < least || args.length > most) {
      const wanted = least === most ? `${least}` : `${least} or more`;
      throw new CalcError(`${token.text}() takes ${wanted} argument(s), got ${args.length}`, token.at);
    }
    const value = fn.apply(args);
    if (Number.isNaN(value)) throw new CalcError(`${token.text}(${args.join(", ")}) is not defined`, token.at);
    return checked(value, token.at);
  }
}

function checked(value: number, at: number): number {
  if (Number.isNaN(value)) throw new CalcError("the result is not a number", at);
  if (!Number.isFinite(value)) throw new CalcError("the result is too large", at);
  return value;
}

/**
 * Evaluate an arithmetic expression exactly as written and return its value.
 * Operators: + - * / ** % and parentheses, unary minus; functions: sqrt abs round floor ceil
 * sin cos tan log (natural) log2 log10 exp pow min max; constants: PI and E.
 * @param expression - The expression, e.g. "2 * (3 + 4) ** 2" or "sqrt(2) * PI".
 * @title Calculator
 * @summary Evaluate an arithmetic expression (no code is run).
 * @tags math
 * @readOnly
 * @destructive false
 * @idempotent
 * @openWorld false
 * @example {"expression": "2 * (3 + 4) ** 2"}
 * @example {"expression": "max(1, sqrt(16), PI)"}
 * @error syntax error at position N: the expression is malformed
 * @error division by zero at position N
 * @error the result is too large at position N: an overflow such as 10 ** 1000
 */
export function run(expression: string): Calculation {
  if (expression.length > MAX_LENGTH) {
    return failure(`the expression is ${expression.length} characters long; at most ${MAX_LENGTH} are accepted`);
  }
  try {
    const value = new Parser(tokenize(expression)).parse();
    // Fifteen significant digits: 0.1 + 0.2 reads 0.3, as a person expects of a calculator.
    return { expression, value: Number(value.toPrecision(15)) };
  } catch (error) {
    if (!(error instanceof CalcError)) throw error;
    const caret = `${" ".repeat(error.position)}^`;
    return failure(`${error.message} at position ${error.position + 1}\n  ${expression}\n  ${caret}`);
  }
}

// toolexec's {ok: false, error} convention: a failed call whose error a model reads, without a stack trace.
function failure(error: string): Calculation {
  return { ok: false, error } as unknown as Calculation;
}
