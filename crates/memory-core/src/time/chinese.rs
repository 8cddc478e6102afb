//! Chinese expressions of time: 今天, 昨天, 前天, 大前天, 明天; 上周/上个星期/这周/下周 (and 上周末, 上周二); 本月, 上个月,
//! 下个月; 今年, 去年, 前年; N天前, N周前, N个月前, N年前; 最近N天, 过去N周; 周二/星期二/礼拜二; 三月, 3月5日, 2026年,
//! 2026年3月, 2026年3月5日; and 以来/之后/之前 after any of these (自/从 before one is read as part of it).

use chrono::{NaiveDate, Weekday};

use super::{last_units, period, recent_day, recent_month, weekday, DateRange, TimeExpression, Unit, WhichWeekday};

/// Whether `c` is a Han character (CJK Unified Ideographs and extension A).
pub(super) fn is_han(c: char) -> bool {
    matches!(c, '\u{4E00}'..='\u{9FFF}' | '\u{3400}'..='\u{4DBF}')
}

/// A number at the start of `s`: ASCII or full-width digits (up to 4), or Chinese numerals up to 99
/// (一, 两, 十, 十二, 二十, 二十三). Returns the number and the bytes it takes.
fn number(s: &str) -> Option<(u32, usize)> {
    let digits: String = s.chars().take_while(|c| c.is_ascii_digit() || ('０'..='９').contains(c)).take(5).collect();
    if !digits.is_empty() {
        if digits.chars().count() > 4 {
            return None;
        }
        let value: String = digits.chars().map(|c| if c.is_ascii_digit() { c } else { char::from(b'0' + (c as u32 - '０' as u32) as u8) }).collect();
        return Some((value.parse().ok()?, digits.len()));
    }
    let digit =
        |c: char| "〇一二三四五六七八九".chars().position(|d| d == c).map(|n| n as u32).or((c == '两').then_some(2)).or((c == '零').then_some(0));
    let mut chars = s.char_indices().peekable();
    let mut value = 0;
    let mut end = 0;
    let mut seen_ten = false;
    let mut current: Option<u32> = None;
    while let Some(&(i, c)) = chars.peek() {
        if c == '十' && !seen_ten {
            value = current.unwrap_or(1) * 10;
            current = None;
            seen_ten = true;
        } else if let Some(d) = digit(c) {
            if current.is_some() {
                break;
            }
            current = Some(d);
        } else {
            break;
        }
        end = i + c.len_utf8();
        chars.next();
    }
    if end == 0 {
        return None;
    }
    Some((value + current.unwrap_or(0), end))
}

/// The first of `options` that `s` starts with, and its length in bytes.
fn starts<'a>(s: &str, options: &[&'a str]) -> Option<&'a str> {
    options.iter().copied().find(|o| s.starts_with(o))
}

fn weekday_char(c: char) -> Option<Weekday> {
    match c {
        '一' => Some(Weekday::Mon),
        '二' => Some(Weekday::Tue),
        '三' => Some(Weekday::Wed),
        '四' => Some(Weekday::Thu),
        '五' => Some(Weekday::Fri),
        '六' => Some(Weekday::Sat),
        '日' | '天' => Some(Weekday::Sun),
        _ => None,
    }
}

const WEEK_WORDS: &[&str] = &["星期", "礼拜", "周"];

/// Words that begin with 周 but do not mean a week: 周报 (weekly report), 周边, 周围, 周年, 周期, 周刊, 周岁.
fn week_word_at(s: &str) -> Option<&'static str> {
    let word = starts(s, WEEK_WORDS)?;
    let after = s[word.len()..].chars().next();
    (word != "周" || !after.is_some_and(|c| "报边围年期刊岁到全".contains(c))).then_some(word)
}

/// A point or period at the start of `s`: its range and its length in bytes.
fn point(s: &str, today: NaiveDate, previous: Option<char>) -> Option<(DateRange, usize)> {
    const DAYS: &[(&str, i64)] = &[
        ("大前天", -3),
        ("前天", -2),
        ("昨天", -1),
        ("昨日", -1),
        ("昨晚", -1),
        ("今天", 0),
        ("今日", 0),
        ("今晚", 0),
        ("今早", 0),
        ("明天", 1),
        ("明日", 1),
        ("后天", 2),
    ];
    const YEARS: &[(&str, i64)] = &[("大前年", -3), ("前年", -2), ("去年", -1), ("今年", 0), ("明年", 1)];
    for (words, unit) in [(DAYS, Unit::Day), (YEARS, Unit::Year)] {
        if let Some((w, n)) = words.iter().find(|(w, _)| s.starts_with(w)) {
            return Some((period(today, unit, *n)?, w.len()));
        }
    }
    // 上周, 上个星期, 这周, 本周, 下周 (+ 末, + a weekday); 上个月, 本月, 下个月.
    const SHIFTS: &[(&str, i64)] = &[("上个", -1), ("上", -1), ("这个", 0), ("这", 0), ("本", 0), ("下个", 1), ("下", 1)];
    for (prefix, n) in SHIFTS {
        let Some(rest) = s.strip_prefix(prefix) else { continue };
        if let Some(week) = week_word_at(rest) {
            let after = &rest[week.len()..];
            let taken = prefix.len() + week.len();
            if after.starts_with('末') {
                let w = period(today, Unit::Week, *n)?;
                return Some((DateRange::weekend_of(w.first), taken + '末'.len_utf8()));
            }
            if let Some(day) = after.chars().next().and_then(weekday_char) {
                return Some((weekday(today, day, WhichWeekday::InWeek(*n))?, taken + 3));
            }
            return Some((period(today, Unit::Week, *n)?, taken));
        }
        if rest.starts_with('月') && !matches!(*prefix, "这") {
            return Some((period(today, Unit::Month, *n)?, prefix.len() + '月'.len_utf8()));
        }
    }
    // 最近三天, 过去两周, 近一个月.
    if let Some(lead) = starts(s, &["最近", "过去", "近"]) {
        let rest = &s[lead.len()..];
        if let Some((n, len)) = number(rest) {
            if let Some((unit, ulen)) = unit_at(&rest[len..]) {
                return Some((last_units(today, unit, i64::from(n))?, lead.len() + len + ulen));
            }
        }
    }
    // 周二, 星期二, 礼拜天 (not 每周一, 一周一次).
    if let Some(week) = week_word_at(s) {
        let counted = previous.is_some_and(|p| "每一两几数个".contains(p));
        if let Some(day) = s[week.len()..].chars().next().and_then(weekday_char).filter(|_| !counted) {
            return Some((weekday(today, day, WhichWeekday::Recent)?, week.len() + 3));
        }
    }
    // Numbers: N天前, N个月前, 2026年3月5日, 3月5号, 三月.
    let (n, len) = number(s)?;
    let rest = &s[len..];
    if let Some((unit, ulen)) = unit_at(rest) {
        let after = &rest[ulen..];
        if let Some(ago) = starts(after, &["以前", "之前", "前"]).filter(|_| n < 100) {
            return Some((period(today, unit, -i64::from(n))?, len + ulen + ago.len()));
        }
        if after.starts_with('内') && n < 1000 {
            return Some((last_units(today, unit, i64::from(n))?, len + ulen + '内'.len_utf8()));
        }
    }
    if len >= 4 && rest.starts_with('年') {
        let y = i32::try_from(n).ok().filter(|y| (1900..=2200).contains(y))?;
        let after_year = &rest['年'.len_utf8()..];
        if let Some((m, mlen, day)) = month_and_day(after_year) {
            let range = match day {
                Some((d, _)) => DateRange::day(NaiveDate::from_ymd_opt(y, m, d)?),
                None => DateRange::month(y, m)?,
            };
            return Some((range, len + '年'.len_utf8() + mlen + day.map_or(0, |(_, l)| l)));
        }
        return Some((DateRange::year(y)?, len + '年'.len_utf8()));
    }
    let (m, mlen, day) = month_and_day(s)?;
    match day {
        Some((d, dlen)) => Some((recent_day(today, m, d)?, mlen + dlen)),
        None => Some((recent_month(today, m)?, mlen)),
    }
}

/// A unit after a number: 天/日, 周/个星期/个礼拜/星期, 个月, 年.
fn unit_at(s: &str) -> Option<(Unit, usize)> {
    const UNITS: &[(&str, Unit)] = &[
        ("个星期", Unit::Week),
        ("个礼拜", Unit::Week),
        ("星期", Unit::Week),
        ("个周", Unit::Week),
        ("周", Unit::Week),
        ("个月", Unit::Month),
        ("天", Unit::Day),
        ("日", Unit::Day),
        ("年", Unit::Year),
    ];
    UNITS.iter().find(|(w, _)| s.starts_with(w)).map(|(w, u)| (*u, w.len()))
}

/// A number and the bytes it takes.
type Counted = (u32, usize);

/// `M月` (1..=12, optionally 份) and an optional `D日`/`D号` at the start of `s`: the month, the bytes of the month
/// part, and the day with its bytes.
fn month_and_day(s: &str) -> Option<(u32, usize, Option<Counted>)> {
    let (m, len) = number(s).filter(|(m, _)| (1..=12).contains(m))?;
    let rest = s[len..].strip_prefix('月')?;
    let mut mlen = len + '月'.len_utf8();
    if let Some((d, dlen)) = number(rest).filter(|(d, _)| (1..=31).contains(d)) {
        if let Some(mark) = starts(&rest[dlen..], &["日", "号"]) {
            return Some((m, mlen, Some((d, dlen + mark.len()))));
        }
    }
    if rest.starts_with('份') {
        mlen += '份'.len_utf8();
    }
    Some((m, mlen, None))
}

pub(super) fn find(query: &str, today: NaiveDate) -> Vec<TimeExpression> {
    let mut out = Vec::new();
    let mut previous: Option<char> = None;
    let mut i = 0;
    while let Some(c) = query.get(i..).and_then(|rest| rest.chars().next()) {
        let next = i + c.len_utf8();
        let candidate = is_han(c) || c.is_ascii_digit() || ('０'..='９').contains(&c);
        // Digits glued to letters or other digits before them are not a date ("v3月" is not March).
        let glued = c.is_ascii_digit() && previous.is_some_and(|p| p.is_ascii_alphanumeric());
        let found = if candidate && !glued { expression(query, i, today, previous) } else { None };
        match found {
            Some(e) => {
                i = e.span.end;
                previous = query[..i].chars().next_back();
                out.push(e);
            }
            None => {
                previous = Some(c);
                i = next;
            }
        }
    }
    out
}

/// The expression starting at byte `i`, with a leading 自/从 and a trailing 以来/之后/之前 read into it.
fn expression(query: &str, i: usize, today: NaiveDate, previous: Option<char>) -> Option<TimeExpression> {
    let lead = starts(&query[i..], &["自从", "自", "从"]).filter(|l| point(&query[i + l.len()..], today, None).is_some());
    let at = i + lead.map_or(0, str::len);
    let (range, len) = point(&query[at..], today, if lead.is_some() { None } else { previous })?;
    let end = at + len;
    let rest = &query[end..];
    let (range, end) = if let Some(since) = starts(rest, &["以来", "开始", "起"]).filter(|w| lead.is_some() || *w == "以来") {
        (range.since(today), end + since.len())
    } else if let Some(after) = starts(rest, &["之后", "以后"]) {
        (range.after(today).unwrap_or(range), end + after.len())
    } else if let Some(before) = starts(rest, &["之前", "以前"]) {
        (range.before().unwrap_or(range), end + before.len())
    } else {
        // 从 without 以来/起 is "from": the expression alone.
        return Some(TimeExpression { range, span: at..end });
    };
    Some(TimeExpression { range, span: if lead.is_some() { i..end } else { at..end } })
}
