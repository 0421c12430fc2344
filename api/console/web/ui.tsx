// The console's shared pieces: the page frame (one h1, the document title, focus after a
// navigation), problem display (title, detail and each field error next to its input), form
// fields wired for assistive technology, buttons that show progress, loading and empty states.
import {
  createContext,
  type ComponentChildren,
  type PartialInputHTMLAttributes,
  type PartialSelectHTMLAttributes,
  type TextareaHTMLAttributes,
  type InputHTMLAttributes,
} from "preact";
import { useCallback, useContext, useEffect, useRef, useState } from "preact/hooks";
import { ProblemError, toProblem, type Problem } from "./api.ts";
import { hasNavigated } from "./router.tsx";

// ---------------------------------------------------------------------------------------------
// Page frame

export function Page(props: { title: string; heading?: ComponentChildren; lead?: ComponentChildren; children?: ComponentChildren }) {
  const h1 = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    document.title = `${props.title} · Berth console`;
  }, [props.title]);
  useEffect(() => {
    // After an in-app navigation, move the focus to the new page's heading (as a page load would
    // start reading there); on the first load the browser's own focus handling is kept.
    if (hasNavigated()) h1.current?.focus();
  }, []);
  return (
    <>
      {props.lead}
      <h1 ref={h1} tabIndex={-1}>
        {props.heading ?? props.title}
      </h1>
      {props.children}
    </>
  );
}

// ---------------------------------------------------------------------------------------------
// Loading data

export type Loaded<T> = { state: "loading" } | { state: "ok"; data: T } | { state: "error"; problem: Problem };

/** Runs `load` now and whenever `deps` change; `reload` runs it again (keeping the data shown meanwhile). */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[]): [Loaded<T>, () => Promise<void>] {
  const [value, setValue] = useState<Loaded<T>>({ state: "loading" });
  const generation = useRef(0);
  const run = useCallback(async () => {
    const mine = ++generation.current;
    try {
      const data = await load();
      if (mine === generation.current) setValue({ state: "ok", data });
    } catch (err) {
      if (mine === generation.current) setValue({ state: "error", problem: toProblem(err) });
    }
  }, deps);
  useEffect(() => {
    setValue({ state: "loading" });
    void run();
    return () => void generation.current++;
  }, [run]);
  return [value, run];
}

/** Renders a Loaded: a loading line, the problem, or `children(data)`. */
export function Show<T>(props: { value: Loaded<T>; what: string; children: (data: T) => ComponentChildren }) {
  if (props.value.state === "loading") return <Loading what={props.what} />;
  if (props.value.state === "error") return <ProblemAlert problem={props.value.problem} />;
  return <>{props.children(props.value.data)}</>;
}

export function Loading({ what }: { what: string }) {
  return (
    <p class="loading" role="status">
      Loading {what}…
    </p>
  );
}

export function Empty({ children }: { children: ComponentChildren }) {
  return <p class="empty">{children}</p>;
}

/** Calls `fn` every `ms` while `active` (for following a running deployment). */
export function usePoll(fn: () => unknown, ms: number, active: boolean): void {
  const latest = useRef(fn);
  latest.current = fn;
  useEffect(() => {
    if (!active) return undefined;
    const t = setInterval(() => void latest.current(), ms);
    return () => clearInterval(t);
  }, [ms, active]);
}

// ---------------------------------------------------------------------------------------------
// Problems and forms

/** The name of the form field a problem's field path points at: body.name → name, params.name → name. */
export function fieldName(path: string): string {
  return path.replace(/^(body|query|params)\.?/, "");
}

function errorsFor(problem: Problem | undefined, name: string): string[] {
  return (problem?.errors ?? [])
    .filter((e) => {
      const f = fieldName(e.field);
      return f === name || f.startsWith(`${name}.`) || f.startsWith(`${name}[`);
    })
    .map((e) => e.message);
}

/** A problem+json answer: its title and detail, and each field error (also shown at its field). */
export function ProblemAlert({ problem }: { problem: Problem | undefined }) {
  if (!problem) return null;
  return (
    <div class="problem" role="alert">
      <p class="problem-title">{problem.title}</p>
      <p>{problem.detail}</p>
      {problem.errors && problem.errors.length > 0 && (
        <ul>
          {problem.errors.map((e) => (
            <li key={e.field}>
              <code>{fieldName(e.field) || e.field}</code>: {e.message}
            </li>
          ))}
        </ul>
      )}
      {problem.requestId && <p class="muted small">Request id {problem.requestId}</p>}
    </div>
  );
}

interface FormState {
  id: string;
  problem: Problem | undefined;
}
const FormContext = createContext<FormState>({ id: "f", problem: undefined });

/**
 * A form whose submit handler is async: the problem it throws is shown above the fields and at
 * each field it names; while it runs the submit button is disabled and says "Working…".
 */
export function Form(props: {
  id: string;
  label?: string;
  onSubmit: (data: FormData, form: HTMLFormElement) => Promise<void>;
  submit: string;
  children: ComponentChildren;
  extra?: ComponentChildren;
  class?: string;
}) {
  const [problem, setProblem] = useState<Problem>();
  const [busy, setBusy] = useState(false);
  const submit = async (e: SubmitEvent) => {
    e.preventDefault();
    const form = e.currentTarget as HTMLFormElement;
    setBusy(true);
    setProblem(undefined);
    try {
      await props.onSubmit(new FormData(form), form);
    } catch (err) {
      setProblem(toProblem(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <FormContext.Provider value={{ id: props.id, problem }}>
      <form id={props.id} class={props.class ?? "form"} aria-label={props.label} onSubmit={(e) => void submit(e)} noValidate>
        <ProblemAlert problem={problem} />
        {props.children}
        <div class="actions">
          <SubmitButton busy={busy}>{props.submit}</SubmitButton>
          {props.extra}
        </div>
      </form>
    </FormContext.Provider>
  );
}

export function SubmitButton({ busy, children }: { busy: boolean; children: ComponentChildren }) {
  return (
    <>
      <button type="submit" class="primary" disabled={busy} aria-busy={busy}>
        {children}
      </button>
      {busy && <Working />}
    </>
  );
}

export function Working() {
  return (
    <span class="working" role="status">
      Working…
    </span>
  );
}

/**
 * A button for a one-off action (deploy, verify, revoke…): disabled with "Working…" while it runs,
 * the problem shown after it when it fails.
 */
export function ActionButton(props: {
  onClick: () => Promise<unknown>;
  children: ComponentChildren;
  label?: string;
  kind?: "primary" | "danger" | "plain";
  disabled?: boolean;
}) {
  const [busy, setBusy] = useState(false);
  const [problem, setProblem] = useState<Problem>();
  const alive = useRef(true);
  useEffect(
    () => () => {
      alive.current = false;
    },
    [],
  );
  const run = async () => {
    setBusy(true);
    setProblem(undefined);
    try {
      await props.onClick();
    } catch (err) {
      if (alive.current) setProblem(toProblem(err));
    } finally {
      if (alive.current) setBusy(false);
    }
  };
  return (
    <span class="action">
      <button
        type="button"
        class={props.kind ?? "plain"}
        aria-label={props.label}
        disabled={busy || props.disabled}
        aria-busy={busy}
        onClick={() => void run()}
      >
        {props.children}
      </button>
      {busy && <Working />}
      <ProblemAlert problem={problem} />
    </span>
  );
}

export function useField(name: string): { id: string; errors: string[]; describedBy: (hint?: boolean) => string | undefined } {
  const { id: formId, problem } = useContext(FormContext);
  const id = `${formId}-${name.replace(/[^A-Za-z0-9_-]/g, "-")}`;
  const errors = errorsFor(problem, name);
  return {
    id,
    errors,
    describedBy: (hint) => [hint ? `${id}-hint` : "", errors.length ? `${id}-error` : ""].filter(Boolean).join(" ") || undefined,
  };
}

export function FieldExtras({ id, hint, errors }: { id: string; hint?: ComponentChildren; errors: string[] }) {
  return (
    <>
      {hint && (
        <p id={`${id}-hint`} class="hint">
          {hint}
        </p>
      )}
      {errors.length > 0 && (
        <p id={`${id}-error`} class="field-error">
          {errors.join(" ")}
        </p>
      )}
    </>
  );
}

type InputType = "text" | "password" | "number" | "url" | "search" | "email" | "datetime-local";
type InputProps = Omit<PartialInputHTMLAttributes<HTMLInputElement>, "name" | "label" | "id" | "role" | "type"> & {
  name: string;
  label: string;
  hint?: ComponentChildren;
  type?: InputType;
};

/** A labelled input; a field error for `name` (body.<name>) is shown under it and announced with it. */
export function Field({ name, label, hint, type = "text", ...rest }: InputProps) {
  const f = useField(name);
  return (
    <div class="field">
      <label for={f.id}>{label}</label>
      <input
        {...({ ...rest, type } as InputHTMLAttributes<HTMLInputElement>)}
        id={f.id}
        name={name}
        aria-invalid={f.errors.length > 0 ? true : undefined}
        aria-describedby={f.describedBy(hint !== undefined)}
      />
      <FieldExtras id={f.id} hint={hint} errors={f.errors} />
    </div>
  );
}

export function Checkbox({ name, label, hint, ...rest }: Omit<InputProps, "type">) {
  const f = useField(name);
  return (
    <div class="field checkbox">
      <input
        {...rest}
        id={f.id}
        type="checkbox"
        name={name}
        value="on"
        aria-invalid={f.errors.length > 0 ? true : undefined}
        aria-describedby={f.describedBy(hint !== undefined)}
      />
      <label for={f.id}>{label}</label>
      <FieldExtras id={f.id} hint={hint} errors={f.errors} />
    </div>
  );
}

type SelectProps = Omit<PartialSelectHTMLAttributes<HTMLSelectElement>, "name" | "label" | "id" | "role"> & {
  name: string;
  label: string;
  hint?: ComponentChildren;
  options: readonly (string | readonly [value: string, label: string])[];
};

/** A labelled select; `defaultValue` marks its option selected (a <select> has no defaultValue property to set). */
export function Select({ name, label, hint, options, defaultValue, ...rest }: SelectProps) {
  const f = useField(name);
  return (
    <div class="field">
      <label for={f.id}>{label}</label>
      <select
        id={f.id}
        name={name}
        aria-invalid={f.errors.length > 0 ? true : undefined}
        aria-describedby={f.describedBy(hint !== undefined)}
        {...rest}
      >
        {options.map((o) => {
          const [value, text] = typeof o === "string" ? [o, o] : o;
          return (
            <option key={value} value={value} selected={rest.value === undefined ? value === defaultValue : undefined}>
              {text}
            </option>
          );
        })}
      </select>
      <FieldExtras id={f.id} hint={hint} errors={f.errors} />
    </div>
  );
}

type TextAreaProps = Omit<TextareaHTMLAttributes<HTMLTextAreaElement>, "name" | "label" | "id" | "role"> & {
  name: string;
  label: string;
  hint?: ComponentChildren;
};

export function TextArea({ name, label, hint, ...rest }: TextAreaProps) {
  const f = useField(name);
  return (
    <div class="field">
      <label for={f.id}>{label}</label>
      <textarea
        id={f.id}
        name={name}
        aria-invalid={f.errors.length > 0 ? true : undefined}
        aria-describedby={f.describedBy(hint !== undefined)}
        {...rest}
      />
      <FieldExtras id={f.id} hint={hint} errors={f.errors} />
    </div>
  );
}

/** A group of checkboxes named `name` (one value each), in a fieldset with a legend. */
export function CheckboxGroup(props: {
  name: string;
  legend: string;
  options: readonly string[];
  checked: readonly string[];
  hint?: string;
}) {
  const f = useField(props.name);
  return (
    <fieldset class="group" aria-describedby={f.describedBy(props.hint !== undefined)}>
      <legend>{props.legend}</legend>
      <div class="choices">
        {props.options.map((o) => (
          <label key={o} class="choice">
            <input type="checkbox" name={props.name} value={o} defaultChecked={props.checked.includes(o)} /> {o.replace(/_/g, " ")}
          </label>
        ))}
      </div>
      <FieldExtras id={f.id} hint={props.hint} errors={f.errors} />
    </fieldset>
  );
}

// ---------------------------------------------------------------------------------------------
// Reading forms

/** A trimmed text value; undefined when empty. */
export function text(data: FormData, name: string): string | undefined {
  const v = data.get(name);
  if (typeof v !== "string") return undefined;
  const t = v.trim();
  return t === "" ? undefined : t;
}

/** A number value; undefined when empty; NaN is passed on for the API to refuse with a field error. */
export function num(data: FormData, name: string): number | undefined {
  const t = text(data, name);
  return t === undefined ? undefined : Number(t);
}

export function checked(data: FormData, name: string): boolean {
  return data.get(name) === "on";
}

export function lines(data: FormData, name: string): string[] {
  return (text(data, name) ?? "")
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean);
}

/** Throws the problem an error answer carries (for code that checks answers itself). */
export function fail(problem: Problem): never {
  throw new ProblemError(problem);
}

// ---------------------------------------------------------------------------------------------
// Formatting

const dateTime = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });

export function when(iso: string | null | undefined): string {
  if (!iso) return "—";
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : dateTime.format(d);
}

export function Time({ iso }: { iso: string | null | undefined }) {
  if (!iso) return <>—</>;
  return <time dateTime={iso}>{when(iso)}</time>;
}

export function duration(fromIso: string | null | undefined, toIso: string | null | undefined): string {
  if (!fromIso) return "—";
  const ms = (toIso ? new Date(toIso).getTime() : Date.now()) - new Date(fromIso).getTime();
  if (!Number.isFinite(ms) || ms < 0) return "—";
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${s % 60} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

const numberFormat = new Intl.NumberFormat();
export function count(n: number): string {
  return numberFormat.format(n);
}

export function percent(fraction: number): string {
  return `${(fraction * 100).toFixed(1)} %`;
}

export function usd(n: number): string {
  return `$${n.toFixed(n < 1 ? 4 : 2)}`;
}

export function shortSha(sha: string | null | undefined): string {
  return sha ? sha.slice(0, 7) : "—";
}

/** A status word with a colour that is not the only cue (the word is always written). */
export function Status({ value }: { value: string }) {
  const tone = /^(active|succeeded|verified|valid|pass|running|ready|healthy|ok)$/.test(value)
    ? "good"
    : /(fail|error|expired|invalid|block|claimed|cancel)/.test(value)
      ? "bad"
      : /^(deploying|building|releasing|queued|pending|issuing|expiring|redact|flag|progress)/.test(value)
        ? "busy"
        : "neutral";
  return <span class={`status status-${tone}`}>{value.replace(/_/g, " ")}</span>;
}

/** A table in a focusable, labelled scroll region (usable on a phone, reachable by keyboard). */
export function TableWrap({ label, children }: { label: string; children: ComponentChildren }) {
  return (
    <div class="table-wrap" role="region" aria-label={label} tabIndex={0}>
      <table>
        <caption class="visually-hidden">{label}</caption>
        {children}
      </table>
    </div>
  );
}

/** Refuses a form before it is sent, as the API would (422 with the field's error). */
export function invalid(field: string, message: string): never {
  throw new ProblemError({
    type: "about:blank",
    title: "Unprocessable Entity",
    status: 422,
    detail: "The form has a field to correct.",
    instance: "",
    code: "validation_failed",
    requestId: "",
    errors: [{ field: `body.${field}`, message }],
  });
}
