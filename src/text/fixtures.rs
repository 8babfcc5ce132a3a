//! Real LoCoMo observations shared by the tests of `text` and of the merge and split tools.

/// Real LoCoMo observations (locomo10.json, `observation`).
pub(crate) const FACTS: &[&str] = &[
    "Caroline attended an LGBTQ support group recently and found the transgender stories inspiring.",
    "The support group has made Caroline feel accepted and given her courage to embrace herself.",
    "Melanie is currently managing kids and work and finds it overwhelming.",
    "Melanie painted a lake sunrise last year which holds special meaning to her.",
    "Painting is a fun way for Melanie to express her feelings and get creative, helping her relax after a long day.",
    "Melanie's kids are excited about summer break and they are considering going camping next month.",
    "Caroline went hiking last week and got into a bad spot with some people but tried to apologize.",
    "Dave opened his own car shop last week and celebrated with friends.",
    "Joanna had a dog named Tilly back in Michigan but had to give her away due to allergies.",
    "James and his family are currently on a road trip and have already visited friends Josh and Mark.",
    "Jolene suggested meeting on Friday at 5 after Deborah couldn't make it on Wednesday, mentioning she needed to sort out books from a bookcase.",
    "Pepper, Pixie, Precious, and Panda are the names of Audrey's dogs, each having their own favorite spot to relax.",
    "Caroline values sharing her art and experiences with others, such as Melanie.",
    "John is open to reading George R. R. Martin's books after Tim recommended them.",
    "Evan described the road trip to Jasper as having fresh air, peacefulness, and a cozy cabin surrounded by mountains and forests.",
    "Deborah's mom loved flowers, and they always made her happy.",
    "Maria's new pup, Shadow, is full of energy and brings joy to her life.",
    "Calvin had to deal with insurance and repairs after the car accident.",
];
