//! The honest agent of the adversarial suite: it never sees the gold answer, and adds real information.
//!
//! LoCoMo's observations say "yesterday", "last week" or "last Friday"; the day they were said on is the
//! memory's session date, which the tools show (`[m0000 0.54] 8 May 2023: Caroline went … yesterday`).
//! `resolver` searches the question and rewrites each hit that holds such an expression with the date it
//! means, in LoCoMo's own wording for relative dates ("the week before 9 June 2023", "the Friday before
//! 15 July 2023"). The reward must see this: on a temporal question whose evidence it rewrites, it
//! should rise. On other questions the rewrite is neutral, less the cost of the few characters it adds.

use serde_json::json;

use super::Session;
use crate::dataset::Question;
use crate::episode::EpisodeError;

/// Hits the resolver reads.
const HITS: usize = 10;

pub(super) const MONTH_NAMES: [&str; 12] =
    ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];
const WEEKDAYS: [&str; 7] = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];

/// Searches the question and rewrites every hit whose relative date it can resolve.
pub(super) async fn resolve_dates(s: &mut Session<'_>, q: &Question) -> Result<(), EpisodeError> {
    for hit in s.search(&q.question, HITS).await? {
        let Some(day) = hit.date_label().as_deref().and_then(parse_day) else { continue };
        if let Some(text) = resolve(&hit.text, day) {
            s.call("manage_memory", json!({"operation": "update", "memory_id": hit.id.to_string(), "content": text})).await?;
        }
    }
    Ok(())
}

/// Hits the sweep reads.
const SWEEP_HITS: usize = 20;

/// The honest sweep: searches the question and rewrites every hit in which it can resolve a time word, with
/// every such word resolved (at most eight to a memory), not only the first.
pub(super) async fn sweep(s: &mut Session<'_>, q: &Question) -> Result<(), EpisodeError> {
    for hit in s.search(&q.question, SWEEP_HITS).await? {
        let Some(day) = hit.date_label().as_deref().and_then(parse_day) else { continue };
        let mut text = hit.text.clone();
        for _ in 0..8 {
            match resolve(&text, day) {
                Some(next) => text = next,
                None => break,
            }
        }
        if text != hit.text {
            s.call("manage_memory", json!({"operation": "update", "memory_id": hit.id.to_string(), "content": text})).await?;
        }
    }
    Ok(())
}

/// Writes, for every hit whose relative date it can resolve, an answer card: the question and the date the
/// expression means ("When did Caroline go to the LGBTQ support group? on 7 May 2023"), leaving the memory as
/// it was. The resolver's information, serving only the question asked: where the resolved memory serves
/// other questions too, the resolver should earn more.
pub(super) async fn resolved_cards(s: &mut Session<'_>, q: &Question) -> Result<(), EpisodeError> {
    for hit in s.search(&q.question, HITS).await? {
        let Some(day) = hit.date_label().as_deref().and_then(parse_day) else { continue };
        if let Some(date) = resolve(&hit.text, day).and_then(|t| resolved_part(&hit.text, &t)) {
            s.call("manage_memory", json!({"operation": "create", "content": format!("{} {date}", q.question.trim())})).await?;
        }
    }
    Ok(())
}

/// What `resolve` put in place of the expression: the part of `resolved` between the text's common prefix
/// and suffix with `text`.
fn resolved_part(text: &str, resolved: &str) -> Option<String> {
    let prefix = text.bytes().zip(resolved.bytes()).take_while(|(a, b)| a == b).count();
    let suffix = text.bytes().rev().zip(resolved.bytes().rev()).take_while(|(a, b)| a == b).count();
    let end = resolved.len().checked_sub(suffix)?;
    let part = resolved.get(prefix.min(end)..end)?.trim();
    (!part.is_empty()).then(|| part.to_string())
}

/// A calendar day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Day {
    /// Year.
    pub y: i64,
    /// Month 1..=12.
    pub m: u32,
    /// Day 1..=31.
    pub d: u32,
}

impl Day {
    /// Days since 1970-01-01 (proleptic Gregorian).
    fn days(self) -> i64 {
        let y = if self.m <= 2 { self.y - 1 } else { self.y };
        let era = y.div_euclid(400);
        let yoe = y - era * 400;
        let mp = (self.m as i64 + 9) % 12;
        let doy = (153 * mp + 2) / 5 + self.d as i64 - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        era * 146_097 + doe - 719_468
    }

    fn from_days(z: i64) -> Day {
        let z = z + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
        let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
        Day { y: yoe + era * 400 + i64::from(m <= 2), m, d }
    }

    pub(super) fn plus(self, n: i64) -> Day {
        Day::from_days(self.days() + n)
    }

    /// 0 = Sunday.
    #[cfg(test)]
    fn weekday(self) -> usize {
        (self.days() + 4).rem_euclid(7) as usize
    }
}

impl std::fmt::Display for Day {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} {}", self.d, MONTH_NAMES[self.m as usize - 1], self.y)
    }
}

/// "8 May 2023" (a memory's date label).
pub fn parse_day(label: &str) -> Option<Day> {
    let mut it = label.split_whitespace();
    let d: u32 = it.next()?.parse().ok()?;
    let month = it.next()?.trim_end_matches(',');
    let m = MONTH_NAMES.iter().position(|n| n.eq_ignore_ascii_case(month))? as u32 + 1;
    let y: i64 = it.next()?.parse().ok()?;
    (it.next().is_none() && (1..=31).contains(&d)).then_some(Day { y, m, d })
}

/// `text` with its first relative date expression replaced by the date it means, said on `day`; `None`
/// when it has none this resolver knows.
pub fn resolve(text: &str, day: Day) -> Option<String> {
    let lower = text.to_lowercase();
    let month = |offset: i64| {
        let k = day.y * 12 + day.m as i64 - 1 + offset;
        format!("in {} {}", MONTH_NAMES[k.rem_euclid(12) as usize], k.div_euclid(12))
    };
    let mut rules: Vec<(String, String)> = vec![
        ("last weekend".into(), format!("the weekend before {day}")),
        ("last week".into(), format!("the week before {day}")),
        ("last month".into(), month(-1)),
        ("next month".into(), month(1)),
        ("last year".into(), format!("in {}", day.y - 1)),
        ("last night".into(), format!("on {}", day.plus(-1))),
        ("yesterday".into(), format!("on {}", day.plus(-1))),
        ("this morning".into(), format!("on {day}")),
        ("today".into(), format!("on {day}")),
    ];
    for w in WEEKDAYS {
        rules.push((format!("last {}", w.to_lowercase()), format!("the {w} before {day}")));
    }
    for (phrase, with) in rules {
        let Some(at) = find_word(&lower, &phrase) else { continue };
        // Lowercasing keeps byte offsets for the ASCII phrases matched here.
        return Some(format!("{}{with}{}", &text[..at], &text[at + phrase.len()..]));
    }
    None
}

/// The byte offset of `phrase` in `s` as whole words.
fn find_word(s: &str, phrase: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = s[from..].find(phrase) {
        let at = from + i;
        let before = s[..at].chars().next_back().is_none_or(|c| !c.is_alphanumeric());
        let after = s[at + phrase.len()..].chars().next().is_none_or(|c| !c.is_alphanumeric());
        if before && after {
            return Some(at);
        }
        from = at + phrase.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_dates_resolve_in_locomo_wording() {
        let day = parse_day("8 May 2023").unwrap();
        assert_eq!(day.weekday(), 1, "8 May 2023 was a Monday");
        let r = |t: &str| resolve(t, day);
        assert_eq!(r("Caroline went to a support group yesterday.").unwrap(), "Caroline went to a support group on 7 May 2023.");
        assert_eq!(r("She ran a charity race last Saturday.").unwrap(), "She ran a charity race the Saturday before 8 May 2023.");
        assert_eq!(r("Last week she painted.").unwrap(), "the week before 8 May 2023 she painted.");
        assert_eq!(r("They camped last weekend").unwrap(), "They camped the weekend before 8 May 2023");
        assert_eq!(r("She painted it last year.").unwrap(), "She painted it in 2022.");
        assert_eq!(r("He moved last month").unwrap(), "He moved in April 2023");
        assert_eq!(resolve("He moves next month", parse_day("3 December 2023").unwrap()).unwrap(), "He moves in January 2024");
        assert_eq!(resolve("back yesterday", parse_day("1 March 2024").unwrap()).unwrap(), "back on 29 February 2024");
        assert_eq!(r("She went recently."), None);
        assert_eq!(r("The yesterdays are gone"), None);
        assert_eq!(parse_day("8 May, 2023"), Some(day));
        assert_eq!(parse_day("May 2023"), None);
        assert_eq!(Day::from_days(day.days()), day);
    }
}
