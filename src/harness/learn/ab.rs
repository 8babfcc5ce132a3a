//! The A/B of `memgym learn` ([`super`]): the same policy on the same test questions, with the
//! same episode and sampling seeds, under different experience libraries — so a difference in reward is
//! the library's, not the draw's — and `memgym learn`'s report.
//!
//! Pure. A contrast pairs the arms by question: per question, the mean reward of each arm's scored
//! rollouts; the difference's mean over the questions both arms scored, with a bootstrap 95% CI over
//! questions ([`super::report::bootstrap`], seeded), overall and per category. A contrast is *significant*
//! when its interval excludes 0. Each arm also gives its tool-call validity: the share of its calls the
//! environment carried out, refused, or could not read.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Summary;
use crate::dataset::category_name;
use crate::harness::rollout::record::Trajectory;
use crate::harness::rollout::report::{bootstrap, CallCounts, Mean, Report};

/// One arm as played.
pub struct Arm {
    /// `none`, `epoch-0` or `final`.
    pub name: String,
    /// Experiences in its library.
    pub experiences: usize,
    /// FNV-1a of its library's text.
    pub library_fnv: String,
    /// The earlier arm whose library is the same text: this arm was not played again (same prompt, same
    /// seeds), its figures are that arm's, and a contrast between the two is 0 by construction.
    pub same_as: Option<String>,
    /// Its rollouts' report.
    pub report: Report,
    /// Its trajectories.
    pub trajectories: Vec<Trajectory>,
}

/// An arm's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArmSummary {
    /// Name.
    pub name: String,
    /// Experiences in its library.
    pub experiences: usize,
    /// FNV-1a of its library's text.
    pub library_fnv: String,
    /// The earlier arm with the same library, whose rollouts stand for this one's (not played again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_as: Option<String>,
    /// Rollouts, scored.
    pub scored: usize,
    /// Rollouts failed.
    pub failed: usize,
    /// Mean reward with its cluster-bootstrap 95% CI.
    pub reward: Mean,
    /// Calls made.
    pub calls: usize,
    /// Share of calls carried out.
    pub done: f64,
    /// Share refused by the environment.
    pub refused: f64,
    /// Share that could not be read.
    pub unread: f64,
    /// Share of scored rollouts with at least one call carried out.
    pub edited: f64,
    /// Its rollouts' time, summed, seconds.
    pub rollout_seconds: f64,
}

/// `a − b`, paired by question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Contrast {
    /// The arm measured.
    pub a: String,
    /// The arm it is measured against.
    pub b: String,
    /// Over every question both arms scored.
    pub all: Mean,
    /// Per category, by name.
    pub categories: Vec<(String, Mean)>,
    /// The interval of `all` excludes 0.
    pub significant: bool,
}

/// The A/B.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ab {
    /// The arms.
    pub arms: Vec<ArmSummary>,
    /// final − none, final − epoch-0, epoch-0 − none (those whose arms exist).
    pub contrasts: Vec<Contrast>,
}

/// Per question: (category, mean reward of the scored rollouts).
fn by_question(ts: &[Trajectory]) -> BTreeMap<&str, (u8, f64)> {
    let mut sums: BTreeMap<&str, (u8, f64, usize)> = BTreeMap::new();
    for t in ts {
        if let Some(r) = t.reward() {
            let e = sums.entry(t.job.question_id.as_str()).or_insert((t.job.category, 0.0, 0));
            e.1 += r;
            e.2 += 1;
        }
    }
    sums.into_iter().map(|(q, (c, s, n))| (q, (c, s / n as f64))).collect()
}

/// `a − b` paired by question.
pub fn contrast(a: &Arm, b: &Arm) -> Contrast {
    let qa = by_question(&a.trajectories);
    let qb = by_question(&b.trajectories);
    let pairs: Vec<(u8, f64)> = qa.iter().filter_map(|(q, (c, ra))| qb.get(q).map(|(_, rb)| (*c, ra - rb))).collect();
    let singles = |keep: &dyn Fn(u8) -> bool| -> Vec<Vec<f64>> { pairs.iter().filter(|(c, _)| keep(*c)).map(|(_, d)| vec![*d]).collect() };
    let all = bootstrap(&singles(&|_| true));
    let mut cats: Vec<u8> = pairs.iter().map(|(c, _)| *c).collect();
    cats.sort_unstable();
    cats.dedup();
    let categories = cats
        .into_iter()
        .map(|c| (category_name(c).map_or_else(|| format!("category {c}"), str::to_string), bootstrap(&singles(&|x| x == c))))
        .collect();
    Contrast { a: a.name.clone(), b: b.name.clone(), significant: all.n > 0 && (all.lo > 0.0 || all.hi < 0.0), all, categories }
}

/// An arm's figures, from its report (every call is counted once there, under its parse mode; the A/B
/// only compares runs whose rollouts are all scored).
fn summary(arm: &Arm) -> ArmSummary {
    let r = &arm.report;
    let count = |f: fn(&CallCounts) -> usize| r.modes.values().map(f).sum::<usize>();
    let calls = count(|c| c.calls);
    let share = |x: usize| if calls == 0 { 0.0 } else { x as f64 / calls as f64 };
    ArmSummary {
        name: arm.name.clone(),
        experiences: arm.experiences,
        library_fnv: arm.library_fnv.clone(),
        same_as: arm.same_as.clone(),
        scored: r.scored,
        failed: r.failed,
        reward: r.categories.first().map_or(Mean::EMPTY, |c| c.policy),
        calls,
        done: share(count(|c| c.done)),
        refused: share(count(|c| c.refused)),
        unread: share(count(|c| c.unread)),
        edited: r.edited_share,
        // An arm that reuses another's rollouts cost nothing.
        rollout_seconds: if arm.same_as.is_some() { 0.0 } else { arm.trajectories.iter().map(|t| t.timings.total_ms / 1e3).sum() },
    }
}

/// The A/B of the arms (the first is the baseline `none`).
pub fn compare(arms: &[Arm]) -> Ab {
    let find = |n: &str| arms.iter().find(|a| a.name == n);
    let mut contrasts = Vec::new();
    for (a, b) in [("final", "none"), ("final", "epoch-0"), ("epoch-0", "none")] {
        if let (Some(a), Some(b)) = (find(a), find(b)) {
            contrasts.push(contrast(a, b));
        }
    }
    Ab { arms: arms.iter().map(summary).collect(), contrasts }
}

fn ci(m: &Mean) -> String {
    format!("{:+.4} [{:+.4}, {:+.4}]", m.mean, m.lo, m.hi)
}

/// The A/B as Markdown.
pub fn markdown(ab: &Ab) -> String {
    let mut s = String::from("| arm | experiences | rollouts scored (failed) | mean reward [95% CI] | calls | done | refused | unread | rollouts editing |\n|---|---|---|---|---|---|---|---|---|\n");
    for a in &ab.arms {
        s.push_str(&format!(
            "| {}{} | {} | {} ({}) | {} | {} | {:.1}% | {:.1}% | {:.1}% | {:.1}% |\n",
            a.name,
            a.same_as.as_ref().map(|s| format!(" (the same library as {s}: its rollouts, not played again)")).unwrap_or_default(),
            a.experiences,
            a.scored,
            a.failed,
            ci(&a.reward),
            a.calls,
            a.done * 100.0,
            a.refused * 100.0,
            a.unread * 100.0,
            a.edited * 100.0
        ));
    }
    for c in &ab.contrasts {
        s.push_str(&format!(
            "\n**{} − {}** over {} questions: {}{}\n\n| category | questions | difference [95% CI] |\n|---|---|---|\n",
            c.a,
            c.b,
            c.all.n,
            ci(&c.all),
            if c.significant { " — significant (the interval excludes 0)" } else { " — not significant (the interval holds 0)" }
        ));
        for (name, m) in &c.categories {
            s.push_str(&format!("| {name} | {} | {} |\n", m.n, ci(m)));
        }
    }
    s
}

/// `memgym learn`'s `report.md`.
pub fn learn_markdown(r: &Summary) -> String {
    let st = &r.settings;
    let mut s = format!(
        "# memgym learn report\n\nbank {} · {} epochs × {} train questions × G = {} · A/B over {} test questions × {} per arm · \
         learning steps of {} groups, ≤ {} operations per group · seed {}\n\npolicy {}\n\ncompute over every recorded rollout and learning step (all invocations): rollouts {:.2} h, learning {:.2} h · this invocation {:.0} s\n\n## Epochs\n\n",
        st.bank,
        st.epochs,
        st.train.len(),
        st.group,
        st.test.len(),
        st.ab_group,
        st.learn_batch,
        st.max_operations,
        st.seed,
        r.policy,
        r.compute_seconds().0 / 3600.0,
        r.compute_seconds().1 / 3600.0,
        r.seconds
    );
    s.push_str("| epoch | rollouts scored (failed) | mean train reward [95% CI] | groups with signal | steps applied | experiences after | learning time |\n|---|---|---|---|---|---|---|\n");
    for e in &r.epochs {
        let all = e.rollouts.categories.first().map_or(Mean::EMPTY, |c| c.policy);
        let g = &e.rollouts.grpo;
        s.push_str(&format!(
            "| {} | {} ({}) | {} | {} of {} | {} of {} | {} | {:.0} s |\n",
            e.epoch,
            e.rollouts.scored,
            e.rollouts.failed,
            ci(&all),
            (g.groups as f64 * (1.0 - g.all_equal)).round() as usize,
            g.groups,
            e.steps.iter().filter(|x| x.applied).count(),
            e.steps.len(),
            e.library_size,
            e.steps.iter().map(|x| x.seconds).sum::<f64>()
        ));
    }
    if let Some(ab) = &r.ab {
        s.push_str("\n## A/B on the test questions\n\n");
        s.push_str(&markdown(ab));
    }
    if let Some(last) = r.epochs.last() {
        s.push_str(&format!("\n## The learned library (after epoch {})\n\n", last.epoch));
        if last.library.is_empty() {
            s.push_str("(empty: the learner added nothing)\n");
        } else {
            s.push_str("```text\n");
            s.push_str(&last.library);
            s.push_str("\n```\n");
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::rollout::record::test_support::{run_info, traj};

    fn arm(name: &str, rewards: &[(&str, u8, f64)]) -> Arm {
        let ts: Vec<Trajectory> = rewards.iter().map(|(q, c, r)| traj(q, *c, 0, 1, Some(*r))).collect();
        Arm {
            name: name.into(),
            experiences: 0,
            library_fnv: String::new(),
            same_as: None,
            report: crate::harness::rollout::report::build(run_info(), &ts, &[], &[]),
            trajectories: ts,
        }
    }

    #[test]
    fn a_constant_gain_is_significant_and_no_change_is_not() {
        let qs: Vec<(String, u8)> = (0..30).map(|i| (format!("q{i}"), if i % 2 == 0 { 1 } else { 2 })).collect();
        let base: Vec<(&str, u8, f64)> = qs.iter().enumerate().map(|(i, (q, c))| (q.as_str(), *c, (i % 5) as f64 * 0.1)).collect();
        let better: Vec<(&str, u8, f64)> = base.iter().map(|(q, c, r)| (*q, *c, r + 0.2)).collect();
        let (none, fin, same) = (arm("none", &base), arm("final", &better), arm("epoch-0", &base));
        let ab = compare(&[none, same, fin]);
        assert_eq!(ab.contrasts.len(), 3);
        let f = &ab.contrasts[0];
        assert_eq!((f.a.as_str(), f.b.as_str()), ("final", "none"));
        assert!((f.all.mean - 0.2).abs() < 1e-12 && f.significant && f.all.lo > 0.19, "{f:?}");
        assert_eq!(f.categories.len(), 2);
        let z = &ab.contrasts[2];
        assert_eq!((z.a.as_str(), z.all.mean, z.all.lo, z.all.hi, z.significant), ("epoch-0", 0.0, 0.0, 0.0, false));
        let md = markdown(&ab);
        assert!(md.contains("**final − none** over 30 questions: +0.2000") && md.contains("significant (the interval excludes 0)"), "{md}");
        assert!(md.contains("not significant (the interval holds 0)"));
    }

    #[test]
    fn questions_scored_in_one_arm_only_are_not_paired() {
        let a = arm("final", &[("q1", 1, 1.0), ("q2", 1, 1.0)]);
        let b = arm("none", &[("q1", 1, 0.0)]);
        let c = contrast(&a, &b);
        assert_eq!((c.all.n, c.all.mean), (1, 1.0));
    }

    #[test]
    fn an_arm_that_reuses_another_says_so_and_costs_nothing() {
        let rs = [("q1", 1, 0.0), ("q2", 2, 0.5)];
        let none = arm("none", &rs);
        let fin = Arm { same_as: Some("none".into()), ..arm("final", &rs) };
        let ab = compare(&[none, fin]);
        assert_eq!(ab.arms[1].same_as.as_deref(), Some("none"));
        assert_eq!(ab.arms[1].rollout_seconds, 0.0, "not played: no compute");
        assert!(!ab.contrasts[0].significant && ab.contrasts[0].all.mean == 0.0);
        assert!(markdown(&ab).contains("| final (the same library as none: its rollouts, not played again) |"), "{}", markdown(&ab));
        let json = serde_json::to_value(&ab.arms[0]).unwrap();
        assert!(json.get("same_as").is_none(), "absent when the arm was played");
    }
}
