/**
 * Goal plan snapshots (present_goal_plan): display state a principal keeps for a goal, so a
 * later presentation of the same goal updates the same card. Identity is (principal,
 * Project or none, goal text); each put raises the revision. A plan grants no authority and
 * runs nothing.
 */
import { createHash } from "node:crypto";
import type { Database, Principal } from "@webcodex/platform";

export interface GoalPlanSnapshot {
  planId: string;
  revision: number;
  updatedAtMs: number;
}

export function createGoalPlanStore(db: Database, schema = "refs") {
  return {
    async put(principal: Principal, o: { projectCanonicalId: string; goal: string; stepsJson: string }): Promise<GoalPlanSnapshot> {
      // A stable, opaque id for this principal's goal: the same goal finds the same plan.
      const planId = `wc_plan_${createHash("sha256")
        .update(JSON.stringify([principal.clientId, principal.subject, o.projectCanonicalId, o.goal]))
        .digest("hex")
        .slice(0, 24)}`;
      const r = await db.query<{ revision: string | number; updated_at: Date | string }>(
        `INSERT INTO ${schema}.goal_plans (plan_id, client_id, subject, project_canonical_id, goal, steps)
         VALUES ($1, $2, $3, $4, $5, $6::jsonb)
         ON CONFLICT (plan_id) DO UPDATE SET steps = EXCLUDED.steps, revision = ${schema}.goal_plans.revision + 1, updated_at = now()
         RETURNING revision, updated_at`,
        [planId, principal.clientId, principal.subject, o.projectCanonicalId, o.goal, o.stepsJson],
      );
      const row = r.rows[0];
      if (!row) throw new Error("goal plan not stored");
      return { planId, revision: Number(row.revision), updatedAtMs: new Date(row.updated_at).getTime() };
    },
  };
}
