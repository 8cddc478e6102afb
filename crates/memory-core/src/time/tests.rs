use super::*;

/// Wednesday, 18 March 2026.
fn today() -> NaiveDate {
    d("2026-03-18")
}

fn d(s: &str) -> NaiveDate {
    NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
}

/// `query` holds one expression, `said`, meaning `first..=last`.
fn one(query: &str, said: &str, first: &str, last: &str) {
    let found = find(query, today());
    assert_eq!(found.len(), 1, "{query}: {found:?}");
    assert_eq!(&query[found[0].span.clone()], said, "{query}");
    assert_eq!(found[0].range, DateRange { first: d(first), last: d(last) }, "{query}");
}

#[test]
fn english_days_weeks_months_and_years() {
    one("what did I do today?", "today", "2026-03-18", "2026-03-18");
    one("what did I decide yesterday", "yesterday", "2026-03-17", "2026-03-17");
    one("notes from the day before yesterday", "the day before yesterday", "2026-03-16", "2026-03-16");
    one("what do I have tomorrow", "tomorrow", "2026-03-19", "2026-03-19");
    one("what did we decide this week", "this week", "2026-03-16", "2026-03-22");
    one("what did we decide last week about the database?", "last week", "2026-03-09", "2026-03-15");
    one("plans for next week", "next week", "2026-03-23", "2026-03-29");
    one("what happened last weekend", "last weekend", "2026-03-14", "2026-03-15");
    one("the budget this month", "this month", "2026-03-01", "2026-03-31");
    one("the budget last month", "last month", "2026-02-01", "2026-02-28");
    one("the budget next month", "next month", "2026-04-01", "2026-04-30");
    one("goals this year", "this year", "2026-01-01", "2026-12-31");
    one("goals last year", "last year", "2025-01-01", "2025-12-31");
    one("what did I eat 3 days ago", "3 days ago", "2026-03-15", "2026-03-15");
    one("what did I read two weeks ago", "two weeks ago", "2026-03-02", "2026-03-08");
    one("where was I a month ago", "a month ago", "2026-02-01", "2026-02-28");
    one("what did I fix a couple of days ago", "a couple of days ago", "2026-03-16", "2026-03-16");
    one("where did I live 2 years ago", "2 years ago", "2024-01-01", "2024-12-31");
    one("errors in the past week", "in the past week", "2026-03-11", "2026-03-18");
    one("errors in the last 10 days", "in the last 10 days", "2026-03-08", "2026-03-18");
    one("earlier this month", "earlier this month", "2026-03-01", "2026-03-18");
}

#[test]
fn english_weekdays_and_months() {
    one("what did I do on Monday", "on Monday", "2026-03-16", "2026-03-16");
    one("the call last Tuesday", "last Tuesday", "2026-03-17", "2026-03-17");
    one("the call last Wednesday", "last Wednesday", "2026-03-11", "2026-03-11");
    one("dinner next Friday", "next Friday", "2026-03-20", "2026-03-20");
    one("dinner this Friday", "this Friday", "2026-03-20", "2026-03-20");
    one("Sunday lunch", "Sunday", "2026-03-15", "2026-03-15");
    one("what did I do in March", "in March", "2026-03-01", "2026-03-31");
    one("what did I buy in May", "in May", "2025-05-01", "2025-05-31");
    one("the trip in December 2025", "in December 2025", "2025-12-01", "2025-12-31");
    one("the trip in March of 2024", "in March of 2024", "2024-03-01", "2024-03-31");
    one("what happened on March 3", "on March 3", "2026-03-03", "2026-03-03");
    one("what happened on 3rd March", "on 3rd March", "2026-03-03", "2026-03-03");
    one("the party on October 13, 2023", "on October 13, 2023", "2023-10-13", "2023-10-13");
    one("the party on 13 Oct 2023", "on 13 Oct 2023", "2023-10-13", "2023-10-13");
    one("the move last March", "last March", "2025-03-01", "2025-03-31");
    one("the move last February", "last February", "2026-02-01", "2026-02-28");
    one("the beach in 2023", "in 2023", "2023-01-01", "2023-12-31");
}

#[test]
fn english_since_before_after_and_iso() {
    one("what changed since March 1", "since March 1", "2026-03-01", "2026-03-18");
    one("what changed since last week", "since last week", "2026-03-09", "2026-03-18");
    one("what did I do before 2026-03-10", "before 2026-03-10", "1970-01-01", "2026-03-09");
    one("anything after March 10", "after March 10", "2026-03-11", "2026-03-18");
    one("notes until February", "until February", "1970-01-01", "2026-02-28");
    one("notes from 2026-03-04", "2026-03-04", "2026-03-04", "2026-03-04");
    one("standup 2026/03/04", "2026/03/04", "2026-03-04", "2026-03-04");
    one("the plan for 2026-02", "2026-02", "2026-02-01", "2026-02-28");
}

#[test]
fn chinese_expressions() {
    one("我今天做了什么", "今天", "2026-03-18", "2026-03-18");
    one("昨天的会议", "昨天", "2026-03-17", "2026-03-17");
    one("前天吃了什么", "前天", "2026-03-16", "2026-03-16");
    one("上周决定了什么", "上周", "2026-03-09", "2026-03-15");
    one("上个星期的讨论", "上个星期", "2026-03-09", "2026-03-15");
    one("这周的计划", "这周", "2026-03-16", "2026-03-22");
    one("下周的安排", "下周", "2026-03-23", "2026-03-29");
    one("上周末去了哪里", "上周末", "2026-03-14", "2026-03-15");
    one("本月的预算", "本月", "2026-03-01", "2026-03-31");
    one("上个月的预算", "上个月", "2026-02-01", "2026-02-28");
    one("去年的目标", "去年", "2025-01-01", "2025-12-31");
    one("三天前买了什么", "三天前", "2026-03-15", "2026-03-15");
    one("3天前买了什么", "3天前", "2026-03-15", "2026-03-15");
    one("两周前读的书", "两周前", "2026-03-02", "2026-03-08");
    one("两个月前的旅行", "两个月前", "2026-01-01", "2026-01-31");
    one("三月做了什么", "三月", "2026-03-01", "2026-03-31");
    one("五月份买了什么", "五月份", "2025-05-01", "2025-05-31");
    one("2026年3月的计划", "2026年3月", "2026-03-01", "2026-03-31");
    one("2025年的目标", "2025年", "2025-01-01", "2025-12-31");
    one("3月5日的会议", "3月5日", "2026-03-05", "2026-03-05");
    one("2023年10月13日的会议", "2023年10月13日", "2023-10-13", "2023-10-13");
    one("周二的电话", "周二", "2026-03-17", "2026-03-17");
    one("星期一做了什么", "星期一", "2026-03-16", "2026-03-16");
    one("上周二的电话", "上周二", "2026-03-10", "2026-03-10");
    one("最近三天的错误", "最近三天", "2026-03-15", "2026-03-18");
    one("三月以来的变化", "三月以来", "2026-03-01", "2026-03-18");
    one("自上周以来的变化", "自上周以来", "2026-03-09", "2026-03-18");
    one("三月之前的计划", "三月之前", "1970-01-01", "2026-02-28");
    one("十二月做了什么", "十二月", "2025-12-01", "2025-12-31");
}

#[test]
fn words_that_only_look_like_time_are_not_taken() {
    for q in [
        "What did Melanie realize after the charity race?",
        "How long ago was Caroline's 18th birthday?",
        "May I ask what the wifi password is",
        "the march on Washington",
        "version 1.2.3 of the api",
        "call 555-1234-5678",
        "每周一次的健身课",
        "看一下周报",
        "a day in the life",
        "the past is the past",
        "how many days does the trip take",
        "v2026-03 release",
    ] {
        assert!(find(q, today()).is_empty(), "{q}: {:?}", find(q, today()));
    }
}

#[test]
fn several_expressions_and_what_is_left_for_the_words() {
    let q = "what did we do last weekend before April 10, 2026?";
    let found = find(q, today());
    assert_eq!(found.len(), 2, "{found:?}");
    assert_eq!(without_expressions(q, &found).split_whitespace().collect::<Vec<_>>(), ["what", "did", "we", "do", "?"]);
    let q = "上周三开会讨论了什么";
    let found = find(q, today());
    assert_eq!(without_expressions(q, &found), " 开会讨论了什么");
}

#[test]
fn now_reads_a_date_or_an_instant_and_refuses_anything_else() {
    assert_eq!(now(Some("2026-03-18")).unwrap().0, today());
    assert_eq!(now(Some("2026-03-18T23:30:00-05:00")).unwrap().0, today());
    assert_eq!(now(Some("2026-03-19T01:30:00+08:00")).unwrap().0, d("2026-03-19"));
    let err = now(Some("next tuesday")).unwrap_err();
    assert!(err.contains("next tuesday"), "{err}");
    assert!(now(None).is_ok());
}

#[test]
fn every_input_is_read_without_a_panic() {
    for q in [
        "",
        "年月日",
        "9999年99月99日",
        "0000-00-00",
        "上上上周",
        "十十十天前",
        "999999天前",
        "2026-13-45",
        "the day before",
        "last",
        "in",
        "前",
        "周",
        "\u{200b}今天",
        "ｓｉｎｃｅ",
        "２０２６年３月",
    ] {
        let _ = find(q, today());
    }
    // Far dates do not overflow.
    let _ = find("10000 years ago", NaiveDate::MIN);
    let _ = find("next year", NaiveDate::MAX);
}

proptest::proptest! {
    /// Any text, asked on any day: no panic, spans on character boundaries inside the text, in order and apart,
    /// every range non-empty.
    #[test]
    fn any_text_on_any_day_reads_safely(text in "(\\PC|[0-9年月日周前天上下个星期以来之-])*", days in -40_000i64..40_000) {
        let today = NaiveDate::from_ymd_opt(2026, 3, 18).unwrap() + Duration::days(days);
        let found = find(&text, today);
        let mut end = 0;
        for e in &found {
            proptest::prop_assert!(e.span.start >= end && e.span.start < e.span.end && e.span.end <= text.len());
            proptest::prop_assert!(text.is_char_boundary(e.span.start) && text.is_char_boundary(e.span.end));
            proptest::prop_assert!(e.range.first <= e.range.last);
            end = e.span.end;
        }
        let _ = without_expressions(&text, &found);
    }
}
