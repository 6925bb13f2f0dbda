// A caller of the types openapi-typescript generates from docs/openapi.yaml
// (the test writes them to schema.ts beside a copy of this file and runs
// tsc): it type-checks only if the operations, bodies and answers it relies
// on are what the document promises.
import type { components, operations } from "./schema";

type Evaluate = operations["evaluateDecision"];
export type DecisionRequest = Evaluate["requestBody"]["content"]["application/json"];
export type Decision = Evaluate["responses"][200]["content"]["application/json"];
type Claim = operations["claimExecutionToken"];
export type ClaimRequest = Claim["requestBody"]["content"]["application/json"];
export type ClaimAnswer =
  | Claim["responses"][200]["content"]["application/json"]
  | Claim["responses"][409]["content"]["application/json"];
export type Problem = components["schemas"]["Problem"];

// Amounts are numbers; a string is a type error, not a silent any.
const refund: DecisionRequest = {
  decision_type: "REFUND",
  workflow_key: "refunds",
  amount: 1234567.89,
  actor: { id: "agent-7", type: "agent" },
  action: { type: "refund", amount: 1234567.89, currency: "EUR", target: "order-1" },
};
// @ts-expect-error an amount is a JSON number, never a string
const wrongAmount: DecisionRequest = { amount: "50000" };

async function post<Req, Res>(base: string, apiKey: string, path: string, body: Req): Promise<Res> {
  const res = await fetch(base + path, {
    method: "POST",
    headers: { Authorization: `Bearer ${apiKey}`, "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  const answer: unknown = await res.json();
  if (res.headers.get("Content-Type")?.startsWith("application/problem+json")) {
    const p = answer as Problem;
    throw new Error(`${p.code}: ${p.detail}`);
  }
  return answer as Res;
}

export async function evaluateRefund(base: string, apiKey: string): Promise<Decision["outcome"]> {
  const decision = await post<DecisionRequest, Decision>(base, apiKey, "/v1/protocol/evaluate-decision", refund);
  const seq: number = decision.ledger_seq;
  void seq;
  return decision.outcome;
}

// Only should_execute === true carries a claim token: the union narrows on it.
export async function claim(base: string, apiKey: string, req: ClaimRequest): Promise<string> {
  const answer = await post<ClaimRequest, ClaimAnswer>(base, apiKey, "/v1/execution/claim-token", req);
  if (answer.should_execute) {
    return answer.claim_token;
  }
  throw new Error(`claim refused: ${answer.code}`);
}

void wrongAmount;
