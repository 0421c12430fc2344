// Pure pieces of the error model: zod issues to field errors, problem documents, their headers.
import test from "ava";
import { z } from "zod";
import {
  ConflictError,
  DomainError,
  NotFoundError,
  UnauthorizedError,
  ValidationError,
  fieldErrorsFromZod,
  formatPath,
} from "../../../api/errors.ts";
import { MethodNotAllowedError, ProblemSchema, problemHeaders, renderProblem, toDomainError } from "../../../api/http/problem.ts";

const Schema = z
  .object({
    name: z.string().min(1),
    cpu: z.int().min(50).max(32000),
    kind: z.enum(["a", "b"]),
    nested: z.object({ flag: z.boolean() }).strict().optional(),
    list: z.array(z.object({ n: z.int() }).strict()).optional(),
  })
  .strict();

function errorsOf(input: unknown, prefix: "body" | "query" | "params" = "body") {
  const r = Schema.safeParse(input);
  if (r.success) throw new Error("expected a failure");
  return fieldErrorsFromZod(r.error, prefix);
}

test("every issue becomes a field error with a prefixed path", (t) => {
  const errors = errorsOf({ cpu: 10, kind: "c", nested: { flag: 1 }, list: [{ n: 1 }, { n: "x" }] });
  t.deepEqual(errors.map((e) => e.field).sort(), ["body.cpu", "body.kind", "body.list[1].n", "body.name", "body.nested.flag"]);
  t.is(errors.find((e) => e.field === "body.name")!.message, "required");
  t.regex(errors.find((e) => e.field === "body.cpu")!.message, />=50/);
  t.regex(errors.find((e) => e.field === "body.kind")!.message, /"a"\|"b"/);
});

test("each unknown key is reported at its own path", (t) => {
  const errors = errorsOf({ name: "x", cpu: 100, kind: "a", extra: 1, more: 2, nested: { flag: true, deep: 3 } });
  t.deepEqual(errors, [
    { field: "body.nested.deep", message: "unknown field" },
    { field: "body.extra", message: "unknown field" },
    { field: "body.more", message: "unknown field" },
  ]);
});

test("a root-level issue is reported on the prefix itself", (t) => {
  t.deepEqual(
    errorsOf("text", "query").map((e) => e.field),
    ["query"],
  );
  t.deepEqual(
    errorsOf(null, "params").map((e) => e.field),
    ["params"],
  );
});

test("formatPath uses dots for keys and brackets for indexes", (t) => {
  t.is(formatPath([]), "");
  t.is(formatPath(["a", 0, "b", 12]), "a[0].b[12]");
  t.is(formatPath([0, "x"]), "[0].x");
});

test("domain errors carry status and code; ValidationError summarises its fields", (t) => {
  const v = new ValidationError([{ field: "body.cpu", message: "too big" }]);
  t.is(v.status, 422);
  t.is(v.code, "validation_failed");
  t.is(v.message, "The request is invalid: body.cpu: too big.");
  t.regex(
    new ValidationError([
      { field: "a", message: "x" },
      { field: "b", message: "y" },
    ]).message,
    /2 fields/,
  );
  t.is(new UnauthorizedError().status, 401);
  t.is(new UnauthorizedError().code, "unauthorized");
  t.is(new NotFoundError("app_not_found", "no").status, 404);
  t.true(new ConflictError("x", "y") instanceof DomainError);
  t.is(new ConflictError("x", "y").name, "ConflictError");
});

test("renderProblem builds a valid RFC 9457 document", (t) => {
  const p = renderProblem(new ValidationError([{ field: "body.name", message: "required" }]), { instance: "/api/v1/x", requestId: "r-1" });
  t.deepEqual(p, {
    type: "https://berth.dev/problems/validation_failed",
    title: "Unprocessable Entity",
    status: 422,
    detail: "The request is invalid: body.name: required.",
    instance: "/api/v1/x",
    code: "validation_failed",
    requestId: "r-1",
    errors: [{ field: "body.name", message: "required" }],
  });
  t.true(ProblemSchema.safeParse(p).success);
  const withDetails = renderProblem(new ConflictError("slug_taken", "taken", { details: { slug: "web" } }), {
    instance: "/",
    requestId: "r",
  });
  t.deepEqual(withDetails.details, { slug: "web" });
  t.false("errors" in withDetails);
});

test("anything that is not a domain error becomes a 500 internal without its message", (t) => {
  const { error, internal } = toDomainError(new TypeError("cannot read property 'password' of undefined"));
  t.true(internal);
  t.is(error.status, 500);
  t.is(error.code, "internal");
  const p = renderProblem(error, { instance: "/", requestId: "r" });
  t.false(JSON.stringify(p).includes("password"));
  t.false(toDomainError(new NotFoundError("a", "b")).internal);
  t.true(toDomainError("a string").internal);
});

test("401 carries WWW-Authenticate: Bearer and 405 carries Allow", (t) => {
  t.deepEqual(problemHeaders(new UnauthorizedError()), { "WWW-Authenticate": `Bearer realm="berth"` });
  t.deepEqual(problemHeaders(new MethodNotAllowedError("PUT", ["GET", "POST"])), { Allow: "GET, POST" });
  t.deepEqual(problemHeaders(new NotFoundError("x", "y")), {});
});
